// Unit tests of the live views' status line: `node --test test/`.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ApiError } from '../src/api.js';
import { showFailed, showLoaded } from '../src/dom.js';

const box = () => ({ hidden: true, textContent: '' });

test('a failed read names the series and the API answer, and marks the view stale', () => {
  const [errorBox, note] = [box(), box()];
  showFailed('hits', errorBox, note, new ApiError(404, 'not_found', 'no such counter'));
  assert.equal(errorBox.hidden, false);
  assert.equal(errorBox.textContent, 'Could not read hits: no such counter');
  assert.match(note.textContent, /^Stale · failed at \d\d:\d\d:\d\d$/);
});

test('a server out of reach is said as such', () => {
  const [errorBox, note] = [box(), box()];
  showFailed('hits', errorBox, note, new TypeError('Failed to fetch'));
  assert.equal(errorBox.textContent, 'Could not reach the server (Failed to fetch).');
  assert.equal(errorBox.hidden, false);
});

test('a read that works hides the error and notes the time', () => {
  const [errorBox, note] = [box(), box()];
  showFailed('hits', errorBox, note, new TypeError('down'));
  showLoaded(errorBox, note);
  assert.equal(errorBox.hidden, true);
  assert.match(note.textContent, /^Live · updated \d\d:\d\d:\d\d$/);
});
