// The dashboard's entry point: the hash router (views are linkable:
// #/counters, #/ts, #/daily, #/stats with their parameters), the navigation, and the
// token dialog shown when the server answers 401.

import { currentToken, onTokenChange, setTokenPrompt, storeToken } from './api.js';
import { parseHash } from './lib.js';
import { countersView } from './views/counters.js';
import { dailyView } from './views/daily.js';
import { statsView } from './views/stats.js';
import { tsView } from './views/ts.js';

const VIEWS = { counters: countersView, ts: tsView, daily: dailyView, stats: statsView };
const TITLES = { counters: 'Counters', ts: 'Time series', daily: 'Daily', stats: 'Stats' };

const main = document.getElementById('main');
let current = null; // { name, view }

function route() {
  const { view: name, params } = parseHash(location.hash);
  for (const a of document.querySelectorAll('.nav a')) {
    if (a.dataset.view === name) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  document.title = `${TITLES[name]} · Tally`;
  if (!current || current.name !== name) {
    if (current) current.view.unmount();
    const root = document.createElement('div');
    root.className = `view view-${name}`;
    main.replaceChildren(root);
    current = { name, view: VIEWS[name](root) };
  }
  current.view.update(params);
}

// --- the token dialog -----------------------------------------------------

const dialog = document.getElementById('token-dialog');
const tokenInput = document.getElementById('token-input');
const tokenReason = document.getElementById('token-reason');
const tokenBtn = document.getElementById('token-button');

setTokenPrompt(
  (message) =>
    new Promise((resolve) => {
      tokenReason.textContent = message;
      tokenInput.value = '';
      const done = () => {
        dialog.removeEventListener('close', done);
        const token = dialog.returnValue === 'ok' ? tokenInput.value.trim() || null : null;
        if (!token) tokenButton('cancelled');
        resolve(token);
      };
      dialog.addEventListener('close', done);
      dialog.returnValue = '';
      dialog.showModal();
      tokenInput.focus();
    }),
);

// The header's token button: "Forget token" while one is kept, "Enter token"
// after the user cancelled the prompt. Either way it clears the kept token
// and reloads, so the next 401 asks again.
function tokenButton(state) {
  tokenBtn.hidden = state === 'none';
  tokenBtn.textContent = state === 'kept' ? 'Forget token' : 'Enter token';
}
onTokenChange((token) => tokenButton(token ? 'kept' : 'none'));
tokenButton(currentToken() ? 'kept' : 'none');
tokenBtn.addEventListener('click', () => {
  storeToken('');
  location.reload();
});

// The skip link moves focus without touching the hash (the router owns it).
document.querySelector('.skip').addEventListener('click', (ev) => {
  ev.preventDefault();
  main.focus();
});

window.addEventListener('hashchange', route);
route();
