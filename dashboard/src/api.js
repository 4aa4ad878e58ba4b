// The JSON API client: relative URLs (so the page also works behind a path
// prefix), the bearer token kept in localStorage, and a prompt for a token
// when the server answers 401 (then the request is retried with it).

const TOKEN_KEY = 'tally.token';

/** An error answer of the API (`{"error": {"code", "message"}}`). */
export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

export function storedToken() {
  try {
    return localStorage.getItem(TOKEN_KEY) || '';
  } catch {
    return '';
  }
}

export function storeToken(token) {
  try {
    if (token) localStorage.setItem(TOKEN_KEY, token);
    else localStorage.removeItem(TOKEN_KEY);
  } catch {
    // Storage may be disabled: the token then lasts as long as the page.
  }
  memoryToken = token;
  for (const listener of tokenListeners) listener(token);
}

let memoryToken = storedToken();
const tokenListeners = new Set();

/** Calls `listener(token)` whenever the token changes. */
export function onTokenChange(listener) {
  tokenListeners.add(listener);
}

export function currentToken() {
  return memoryToken;
}

/** Asks the user for a token; resolves to it, or null if they cancel. */
let askToken = async () => null;
/** One prompt at a time: concurrent 401s wait for the same answer. */
let pendingPrompt = null;

/** Installs the function that asks for a token (the page's dialog). */
export function setTokenPrompt(fn) {
  askToken = fn;
}

async function promptOnce(message) {
  if (!pendingPrompt) {
    pendingPrompt = askToken(message).finally(() => {
      pendingPrompt = null;
    });
  }
  return pendingPrompt;
}

/**
 * Fetches `path` (relative, e.g. "v1/counters?prefix=a") and returns the
 * parsed JSON. On 401 asks for a token and retries until the user cancels.
 * `signal` aborts the request.
 */
export async function getJson(path, { signal } = {}) {
  for (;;) {
    const sent = memoryToken;
    const headers = { Accept: 'application/json' };
    if (sent) headers.Authorization = `Bearer ${sent}`;
    const res = await fetch(path, { headers, signal, cache: 'no-store' });
    if (res.status === 401) {
      const body = await res.json().catch(() => null);
      if (memoryToken !== sent) continue; // another request already got a new token
      const message = body?.error?.message || 'This server needs a token.';
      const token = await promptOnce(message);
      if (!token) throw new ApiError(401, 'unauthorized', 'A token is needed to read this server.');
      storeToken(token);
      continue;
    }
    const text = await res.text();
    let body = null;
    try {
      body = text ? JSON.parse(text) : null;
    } catch {
      throw new ApiError(res.status, 'invalid_response', `The server answered ${res.status} with no JSON.`);
    }
    if (!res.ok) {
      const e = body?.error;
      throw new ApiError(res.status, e?.code || 'error', e?.message || `The server answered ${res.status}.`);
    }
    return body;
  }
}
