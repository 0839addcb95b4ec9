// Parses `perf script` text with speedscope's own perf importer (the pinned
// npm package speedscope@1.25.0, see scripts/install-deps.sh) and prints
// the samples it takes, one a line, tab-separated:
//
//   COMMAND PID TID TIME FRAME... (root first; each frame NAME\x1fFILE)
//
// speedscope ships as a browser bundle; its perf-script parser (the
// generator that splits the text at blank lines and the function it hands
// each sample's lines, holding the regex /^\s*(\w+)\s*(.+) \((\S*)\)/) is
// taken out of the bundle and run as is.  Which samples it keeps is its
// importer's rule: those with a time, of the first sample's event.
//
//   node speedscope_perf.js SPEEDSCOPE_PACKAGE_DIR FILE
'use strict';
const fs = require('fs');
const path = require('path');

const [dir, file] = process.argv.slice(2);
const release = path.join(dir, 'dist', 'release');
const bundle = fs.readdirSync(release).find((f) => /^speedscope-.*\.js$/.test(f));
if (!bundle) throw new Error('no speedscope bundle in ' + release);
const src = fs.readFileSync(path.join(release, bundle), 'utf8');
const gen = src.match(
  /function\*(\w+)\((\w+)\)\{let (\w+)=\[\];for\(let (\w+) of \2\.splitLines\(\)\)\4===""\?\(yield (\w+)\(\3\),\3=\[\]\):\3\.push\(\4\);\3\.length>0&&\(yield \5\(\3\)\)\}/);
if (!gen) throw new Error('speedscope perf-script splitter not found in ' + bundle);
const parser = src.match(new RegExp(
  'function ' + gen[5] + '\\(\\w+\\)\\{[^]*?return (\\w+)\\.stack\\.reverse\\(\\),\\1\\}'));
if (!parser || !parser[0].includes('\\((\\S*)\\)')) {
  throw new Error('speedscope perf-script sample parser not found in ' + bundle);
}
const events = new Function(gen[0] + parser[0] + '; return ' + gen[1] + ';')();
const text = fs.readFileSync(file, 'utf8');
const content = { splitLines: () => text.split('\n') };
const out = [];
let eventType = null;
for (const e of events(content)) {
  if (e == null || (eventType != null && eventType != e.eventType) || e.time == null) continue;
  eventType = e.eventType;
  const frames = e.stack.map((f) => f.symbolName + '\x1f' + f.file);
  out.push([e.command, e.processID, e.threadID, e.time, ...frames].join('\t'));
}
process.stdout.write(out.join('\n') + (out.length ? '\n' : ''));
