// Decodes a gzipped pprof profile (profile.proto) with pprof-format, an
// independent reader (the pinned npm package pprof-format@2.3.2, see
// scripts/install-deps.sh), and prints what it holds, one fact a line:
//
//   total N                   the sum of the "samples"/"count" values
//   type TYPE UNIT            each sample type, in order
//   period_type TYPE UNIT     and `period P`, `duration NS`
//   mapping ID START LIMIT OFFSET BUILD_ID|- FILENAME
//   func SELF TOTAL NAME      per function name: samples where it is the
//                             leaf, samples where it is anywhere (once each)
//   bad WHAT                  a broken reference (ids, string indexes)
//
//   node pprof_read.js PPROF_FORMAT_PACKAGE_DIR FILE
'use strict';
const fs = require('fs');
const zlib = require('zlib');

const [dir, file] = process.argv.slice(2);
const { Profile } = require(dir);
const p = Profile.decode(zlib.gunzipSync(fs.readFileSync(file)));
const strings = p.stringTable.strings;
const out = [];
const str = (i, what) => {
  const n = Number(i);
  if (!(n >= 0 && n < strings.length)) out.push(`bad string index ${i} in ${what}`);
  return strings[n];
};
if (strings[0] !== '') out.push('bad string_table[0] is not empty');

const types = p.sampleType.map((t) => [str(t.type, 'sample_type'), str(t.unit, 'sample_type')]);
for (const [t, u] of types) out.push(`type ${t} ${u}`);
if (p.periodType) {
  out.push(`period_type ${str(p.periodType.type, 'period_type')} ${str(p.periodType.unit, 'period_type')}`);
}
out.push(`period ${p.period}`);
out.push(`duration ${p.durationNanos}`);
const count = types.findIndex(([t, u]) => t === 'samples' && u === 'count');
if (count < 0) out.push('bad no samples/count sample type');

const mappings = new Map();
for (const m of p.mapping) {
  if (mappings.has(String(m.id)) || Number(m.id) === 0) out.push(`bad mapping id ${m.id}`);
  mappings.set(String(m.id), m);
  const bid = Number(m.buildId) ? str(m.buildId, 'mapping') : '-';
  out.push(`mapping ${m.id} ${BigInt(m.memoryStart).toString(16)} ${BigInt(m.memoryLimit).toString(16)} ` +
    `${BigInt(m.fileOffset).toString(16)} ${bid} ${str(m.filename, 'mapping')}`);
}
const functions = new Map();
for (const f of p.function) functions.set(String(f.id), str(f.name, 'function'));
const locations = new Map();
for (const l of p.location) {
  const mid = String(l.mappingId);
  if (Number(l.mappingId) !== 0) {
    const m = mappings.get(mid);
    if (!m) {
      out.push(`bad location ${l.id}: mapping ${mid}`);
    } else if (BigInt(l.address) < BigInt(m.memoryStart) || BigInt(l.address) >= BigInt(m.memoryLimit)) {
      out.push(`bad location ${l.id}: address ${BigInt(l.address).toString(16)} outside mapping ${mid}`);
    }
  }
  const names = l.line.map((ln) => {
    const f = functions.get(String(ln.functionId));
    if (f === undefined) out.push(`bad location ${l.id}: function ${ln.functionId}`);
    return f;
  });
  locations.set(String(l.id), names);
}

let total = 0;
const counts = new Map(); // name -> [self, total]
for (const s of p.sample) {
  if (s.value.length !== types.length) out.push('bad sample value count');
  const n = count >= 0 ? Number(s.value[count]) : 0;
  total += n;
  // Leaf first; a location's lines are innermost (inlined) first.
  const frames = [];
  for (const id of s.locationId) {
    const names = locations.get(String(id));
    if (!names) {
      out.push(`bad sample location ${id}`);
      continue;
    }
    frames.push(...names);
  }
  if (frames.length === 0) continue;
  const seen = new Set();
  for (const f of frames) {
    if (!counts.has(f)) counts.set(f, [0, 0]);
    if (!seen.has(f)) {
      seen.add(f);
      counts.get(f)[1] += n;
    }
  }
  counts.get(frames[0])[0] += n;
}
out.push(`total ${total}`);
for (const [name, [self, tot]] of counts) out.push(`func ${self} ${tot} ${name}`);
process.stdout.write(out.join('\n') + '\n');
