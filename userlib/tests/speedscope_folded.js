// Parses a folded-stacks file with speedscope's own importer (the pinned
// npm package speedscope@1.25.0, see scripts/install-deps.sh) and prints
// what it made of it as JSON: [{"stack": [frame, ...], "weight": N}, ...].
//
//   node speedscope_folded.js SPEEDSCOPE_PACKAGE_DIR FILE
//
// speedscope ships as a browser bundle; its collapsed-stack parser (the
// function holding the regex /^(.*) (\d+)$/ and `.split(";")`) is taken out
// of the bundle and run as is, on an object with the splitLines() of its
// TextFileContent.
'use strict';
const fs = require('fs');
const path = require('path');

const [dir, file] = process.argv.slice(2);
const release = path.join(dir, 'dist', 'release');
const bundle = fs.readdirSync(release).find((f) => /^speedscope-.*\.js$/.test(f));
if (!bundle) throw new Error('no speedscope bundle in ' + release);
const src = fs.readFileSync(path.join(release, bundle), 'utf8');
const m = src.match(
  /function (\w+)\((\w+)\)\{let (\w+)=\[\];for\(let \w+ of \2\.splitLines\(\)\)\{let \w+=\/\^\(\.\*\) \(\\d\+\)\$\/gm\.exec\(\w+\);[^]*?return \3\}/);
if (!m) throw new Error('speedscope collapsed-stack parser not found in ' + bundle);
const parse = new Function(m[0] + '; return ' + m[1] + ';')();
const text = fs.readFileSync(file, 'utf8');
const content = { splitLines: () => text.split('\n') };
const out = parse(content).map((s) => ({ stack: s.stack.map((f) => f.name), weight: s.duration }));
process.stdout.write(JSON.stringify(out));
