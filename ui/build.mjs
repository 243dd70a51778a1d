// Builds the management UI into warren/management/ui/static/ (committed; the broker serves it as is).
//   npm run build                 -> warren/management/ui/static/
//   node build.mjs --outdir DIR   -> DIR (the test comparing a fresh build with the committed files)
// The output depends only on the sources and the locked package versions: no timestamps, the
// page names each asset with ?v=<first 12 hex digits of its SHA-256> (the server checks the same).
import * as esbuild from 'esbuild';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const args = process.argv.slice(2);
const outFlag = args.indexOf('--outdir');
const out = outFlag >= 0 ? path.resolve(args[outFlag + 1]) : path.join(here, '..', 'warren', 'management', 'ui', 'static');
const BUNDLED = ['preact', 'htm', 'uplot']; // libraries inside app.js / app.css, with their licences

fs.rmSync(out, { recursive: true, force: true });
fs.mkdirSync(path.join(out, 'licenses'), { recursive: true });

await esbuild.build({
  entryPoints: [path.join(here, 'src', 'main.js')],
  outfile: path.join(out, 'app.js'),
  bundle: true,
  minify: true,
  format: 'iife',
  target: ['es2020', 'chrome100', 'firefox100', 'safari15'],
  legalComments: 'eof',
  charset: 'utf8',
  logLevel: 'warning',
});

const version = (file) => createHash('sha256').update(fs.readFileSync(path.join(out, file))).digest('hex').slice(0, 12);

fs.copyFileSync(path.join(here, 'src', 'favicon.svg'), path.join(out, 'favicon.svg'));
const notices = [];
for (const name of BUNDLED) {
  const dir = path.join(here, 'node_modules', name);
  const pkg = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8'));
  const licence = fs.readFileSync(path.join(dir, 'LICENSE'), 'utf8');
  fs.writeFileSync(path.join(out, 'licenses', `${name}.txt`), `${name} ${pkg.version} (${pkg.license})\n\n${licence}`);
  notices.push(`${name} ${pkg.version} (${pkg.license}): licenses/${name}.txt`);
}
fs.writeFileSync(path.join(out, 'licenses', 'README.txt'),
  'Third-party code bundled into app.js and app.css by ui/build.mjs:\n\n' + notices.join('\n') + '\n');

let page = fs.readFileSync(path.join(here, 'src', 'index.html'), 'utf8');
for (const file of ['app.js', 'app.css', 'favicon.svg']) {
  page = page.replaceAll(`{{${file}}}`, `static/${file}?v=${version(file)}`);
}
fs.writeFileSync(path.join(out, 'index.html'), page);
console.log(`built ${path.relative(process.cwd(), out) || '.'}: ` +
  fs.readdirSync(out).map((f) => `${f}`).join(', '));
