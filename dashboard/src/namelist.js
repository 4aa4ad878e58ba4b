// A searchable list of names (counters, statistics): search by prefix as
// you type, more pages on scroll or on the button, arrow keys to move
// through it. The owning view says what a name links to and which is
// current; the list keeps the keyboard focus across reloads. Beside it, the
// pane of the chosen name's charts, refreshed live.

import { getJson } from './api.js';
import { debounce, h, liveDetail } from './dom.js';
import { fmtCount } from './lib.js';

const PAGE = 100;

/**
 * `kind` names the elements (`#<kind>-search`, `#<kind>-list`,
 * `#<kind>-list-status`) and, with an "s", the API: `GET v1/<kind>s`
 * answers `{ <kind>s: [...], next }`. `hrefFor(name)` is a name's link,
 * `current()` the chosen name, `onSearch(q)` is called when the user typed
 * a new prefix (the view records it in the URL and calls `load(q)`).
 * Returns `{ el, search, load, follow, unmount }`.
 */
export function nameList({ kind, title, placeholder, hrefFor, current, onSearch }) {
  const plural = `${kind}s`;
  let next = null;
  let prefix = '';
  let abort = null;
  let loadingMore = false;

  const search = h('input', {
    id: `${kind}-search`,
    type: 'search',
    placeholder,
    autocomplete: 'off',
    spellcheck: 'false',
    'aria-controls': `${kind}-list`,
  });
  const status = h('p', { class: 'muted small', id: `${kind}-list-status`, 'aria-live': 'polite' });
  const list = h('ul', { id: `${kind}-list`, class: 'name-list', 'aria-describedby': `${kind}-list-status` });
  const more = h('button', { type: 'button', class: 'secondary more', hidden: true }, 'Load more');
  const sentinel = h('div', { class: 'sentinel', 'aria-hidden': 'true' });
  const el = h(
    'aside',
    { class: 'panel list-pane', 'aria-label': title },
    h(
      'div',
      { class: 'list-head' },
      h('label', { for: `${kind}-search`, class: 'field-label' }, `Search ${title.toLowerCase()}`),
      search,
      status,
    ),
    list,
    sentinel,
    more,
  );

  function link(name) {
    return h(
      'a',
      { href: hrefFor(name), class: 'name-link', 'aria-current': name === current() ? 'page' : false, dataset: { name } },
      name,
    );
  }

  function render(names, append) {
    const items = names.map((name) => h('li', {}, link(name)));
    if (append) {
      list.append(...items);
      return;
    }
    // A reload (a later search, a refresh) must not take the keyboard away
    // from someone moving through the list: focus the same name again, or
    // the search box when it is gone.
    const had = list.contains(document.activeElement) ? document.activeElement.dataset.name : null;
    list.replaceChildren(...items);
    if (had !== null) {
      const same = [...list.querySelectorAll('a')].find((a) => a.dataset.name === had);
      (same || search).focus();
    }
  }

  /** Loads the first page of names starting with `q` (or, with `append`, the next page). */
  async function load(q, append = false) {
    if (!append) {
      prefix = q || '';
      next = null;
      if (search.value !== prefix) search.value = prefix;
    }
    if (abort) abort.abort();
    const mine = (abort = new AbortController());
    const query = new URLSearchParams({ prefix, limit: String(PAGE) });
    if (append && next) query.set('cursor', next);
    if (!append) status.textContent = 'Loading…';
    try {
      const page = await getJson(`v1/${plural}?${query}`, { signal: mine.signal });
      if (mine.signal.aborted) return;
      next = page.next;
      render(page[plural], append);
      const n = list.children.length;
      status.textContent =
        n === 0
          ? prefix
            ? `No ${kind} starts with “${prefix}”.`
            : `No ${plural} yet.`
          : `${fmtCount(n)}${next ? '+' : ''} ${n === 1 && !next ? kind : plural}${prefix ? ` starting with “${prefix}”` : ''}`;
      more.hidden = !next;
    } catch (e) {
      if (e.name === 'AbortError') return;
      status.textContent = `Could not list ${plural}: ${e.message}`;
    } finally {
      if (abort === mine) abort = null;
    }
  }

  async function loadMore() {
    if (!next || loadingMore) return;
    loadingMore = true;
    try {
      await load(prefix, true);
    } finally {
      loadingMore = false;
    }
  }

  search.addEventListener(
    'input',
    debounce(() => {
      if (search.value !== prefix) onSearch(search.value);
    }, 150),
  );
  search.addEventListener('keydown', (ev) => {
    if (ev.key === 'ArrowDown' && list.firstElementChild) {
      ev.preventDefault();
      list.firstElementChild.querySelector('a').focus();
    }
  });
  // Arrow keys move through the list; Home/End jump; Enter follows the link.
  list.addEventListener('keydown', (ev) => {
    const li = ev.target.closest('li');
    if (!li) return;
    let to = null;
    if (ev.key === 'ArrowDown') to = li.nextElementSibling;
    else if (ev.key === 'ArrowUp') to = li.previousElementSibling || search;
    else if (ev.key === 'Home') to = list.firstElementChild;
    else if (ev.key === 'End') to = list.lastElementChild;
    else return;
    ev.preventDefault();
    if (!to) return;
    (to === search ? search : to.querySelector('a')).focus();
    if (to === list.lastElementChild) loadMore();
  });
  more.addEventListener('click', loadMore);
  const io = new IntersectionObserver((entries) => {
    if (entries.some((e) => e.isIntersecting)) loadMore();
  });
  io.observe(sentinel);

  return {
    el,
    search,
    load,
    /** Follows a route's prefix: a new one (or an empty list) loads, else the links are re-pointed. */
    follow(q) {
      if ((q || '') !== prefix || list.children.length === 0) load(q);
      else relink(list, hrefFor, current());
    },
    unmount() {
      if (abort) abort.abort();
      io.disconnect();
    },
  };
}

/** Re-points every name link in `el` and its current mark (the route changed, not the names). */
export function relink(el, hrefFor, current) {
  for (const a of el.querySelectorAll('a[data-name]')) {
    a.href = hrefFor(a.dataset.name);
    if (a.dataset.name === current) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
}

/**
 * The detail pane beside a name list: the chosen name's `charts` (a
 * `PrecisionCharts`) under its live head, drawn by `load(name)` every
 * `refreshMs`; `empty()` gives the nodes shown while none is chosen.
 * `choose(name)` switches only when the chosen name changes, stopping the
 * previous name's refreshes; `stop()` ends them and drops the charts.
 */
export function namePane(detail, { charts, refreshMs, load, empty }) {
  let active = null;
  let stop = null;
  let started = false;
  const halt = () => {
    if (stop) stop();
    stop = null;
    charts.clear();
  };
  return {
    choose(name) {
      if (name && name !== active) {
        halt();
        const live = liveDetail(name, [charts.grid], refreshMs, () => load(name));
        stop = live.stop;
        detail.replaceChildren(...live.nodes);
        active = name;
      } else if (!name && (active !== null || !started)) {
        halt();
        active = null;
        detail.replaceChildren(...empty());
      }
      started = true;
    },
    stop: halt,
  };
}

// The view object of a name list beside its detail pane: `update` keeps the
// hash's params (`setParams`), follows their search, runs `onUpdate` (the
// stats' ranking) and chooses their name; `unmount` stops the pane, `stop`
// and the list.
export function nameView(names, pane, { setParams, onUpdate = () => {}, stop = () => {} }) {
  return {
    update(params) {
      setParams({ ...params });
      names.follow(params.q);
      onUpdate();
      pane.choose(params.name);
    },
    focus: () => names.search.focus(),
    unmount() {
      pane.stop();
      stop();
      names.unmount();
    },
  };
}
