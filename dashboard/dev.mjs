// A development server: serves dist/ and the page and icon of src/ as
// `tally serve` does (`/` and `/assets/*`) and forwards everything else to a running tally server, so
// a rebuilt page shows without recompiling the binary.
//
//   node dev.mjs [--port 7080] [--tally http://127.0.0.1:7070]
//
// Rebuild with `npm run build` in another shell and reload the page.

import { createServer, request } from 'node:http';
import { readFile } from 'node:fs/promises';
import { dirname, join, normalize } from 'node:path';
import { fileURLToPath } from 'node:url';

const args = process.argv.slice(2);
const opt = (name, fallback) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : fallback;
};
const port = Number(opt('--port', '7080'));
const tally = new URL(opt('--tally', 'http://127.0.0.1:7070'));
const here = dirname(fileURLToPath(import.meta.url));
const dist = join(here, '..', 'crates', 'tally', 'src', 'server', 'dashboard', 'dist');
// Served from the sources, as the binary embeds them (not copied to dist/).
const sources = new Set(['index.html', 'favicon.svg']);
const types = { html: 'text/html', js: 'text/javascript', css: 'text/css', svg: 'image/svg+xml', txt: 'text/plain' };

createServer(async (req, res) => {
  const path = new URL(req.url, 'http://x').pathname;
  const file = path === '/' ? 'index.html' : path.startsWith('/assets/') ? normalize(path.slice(8)) : null;
  if (file !== null && !file.startsWith('..')) {
    try {
      const body = await readFile(join(sources.has(file) ? join(here, 'src') : dist, file));
      res.writeHead(200, { 'Content-Type': types[file.split('.').pop()] || 'application/octet-stream', 'Cache-Control': 'no-cache' });
      res.end(body);
    } catch {
      res.writeHead(404).end();
    }
    return;
  }
  const upstream = request(
    { host: tally.hostname, port: tally.port, path: req.url, method: req.method, headers: req.headers },
    (up) => {
      res.writeHead(up.statusCode, up.headers);
      up.pipe(res);
    },
  );
  upstream.on('error', (e) => res.writeHead(502).end(String(e)));
  req.pipe(upstream);
}).listen(port, '127.0.0.1', () => console.log(`dashboard dev server on http://127.0.0.1:${port}/ → ${tally}`));
