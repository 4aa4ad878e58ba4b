// Builds the dashboard into crates/tally/src/server/dashboard/dist/, which
// the `tally` binary embeds (so a clone runs the server without npm). The
// page and the icon are not copied there: the binary embeds them from src/
// (crates/tally/src/server/dashboard.rs), as dev.mjs serves them.
//
//   node build.mjs          write dist/
//   node build.mjs --check  build in memory and fail if dist/ differs
//                           (scripts/test runs this: dist/ must match src/)
//
// The build is deterministic: esbuild bundles and minifies src/main.js with
// uPlot into app.js and src/style.css with uPlot's CSS into app.css;
// uPlot's licence is copied as it is.

import { readFile, readdir, mkdir, writeFile, rm } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as esbuild from 'esbuild';

const here = dirname(fileURLToPath(import.meta.url));
const src = join(here, 'src');
const dist = join(here, '..', 'crates', 'tally', 'src', 'server', 'dashboard', 'dist');
const check = process.argv.includes('--check');

const common = {
  bundle: true,
  minify: true,
  write: false,
  legalComments: 'none',
  logLevel: 'warning',
  absWorkingDir: here,
};

async function build() {
  const js = await esbuild.build({
    ...common,
    entryPoints: [join(src, 'main.js')],
    format: 'iife',
    banner: { js: '/*! Tally dashboard. Bundles uPlot (MIT, (c) Leon Sorokin): see LICENSE.uplot.txt */' },
    target: ['es2020'],
    outfile: 'app.js',
  });
  const css = await esbuild.build({
    ...common,
    entryPoints: [join(src, 'style.css')],
    target: ['chrome100', 'firefox100', 'safari15'],
    banner: { css: '/*! Tally dashboard. Includes uPlot.min.css (MIT, (c) Leon Sorokin): see LICENSE.uplot.txt */' },
    outfile: 'app.css',
  });
  const text = (r) => r.outputFiles[0].text;
  const licence = await readFile(join(here, 'node_modules', 'uplot', 'LICENSE'), 'utf8');
  const { version } = JSON.parse(await readFile(join(here, 'node_modules', 'uplot', 'package.json'), 'utf8'));
  return new Map([
    ['app.js', text(js)],
    ['app.css', text(css)],
    ['LICENSE.uplot.txt', `uPlot ${version} (https://github.com/leeoniya/uPlot), bundled into app.js and app.css:\n\n${licence}`],
  ]);
}

const files = await build();
const total = [...files.values()].reduce((n, s) => n + Buffer.byteLength(s), 0);

if (check) {
  const problems = [];
  let present = [];
  try {
    present = await readdir(dist);
  } catch {
    problems.push(`${dist} does not exist`);
  }
  for (const name of present) {
    if (!files.has(name)) problems.push(`dist/${name} is not made by the build`);
  }
  for (const [name, content] of files) {
    const old = await readFile(join(dist, name), 'utf8').catch(() => null);
    if (old === null) problems.push(`dist/${name} is missing`);
    else if (old !== content) problems.push(`dist/${name} differs from a build of dashboard/src`);
  }
  if (problems.length) {
    console.error(
      `dashboard: dist/ is out of date:\n  ${problems.join('\n  ')}\n` +
        'Rebuild it with `cd dashboard && npm ci && npm run build` and commit the result.',
    );
    process.exit(1);
  }
  console.log(`dashboard: dist/ matches the sources (${files.size} files, ${total} bytes)`);
} else {
  await rm(dist, { recursive: true, force: true });
  await mkdir(dist, { recursive: true });
  for (const [name, content] of files) await writeFile(join(dist, name), content);
  for (const [name, content] of files) console.log(`${String(Buffer.byteLength(content)).padStart(8)}  dist/${name}`);
  console.log(`${String(total).padStart(8)}  total`);
}
