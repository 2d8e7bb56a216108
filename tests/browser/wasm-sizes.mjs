// Which crates the .wasm's code bytes belong to, from its "name" section (function names are
// mangled Rust paths). Run: node tests/browser/wasm-sizes.mjs pkg/needle_core_bg.wasm
import { readFileSync } from "node:fs";

const bytes = readFileSync(process.argv[2] ?? "pkg/needle_core_bg.wasm");
let pos = 0;
const leb = () => {
  let r = 0, shift = 0, b;
  do {
    b = bytes[pos++];
    r += (b & 0x7f) * 2 ** shift;
    shift += 7;
  } while (b & 0x80);
  return r;
};
const str = () => {
  const n = leb();
  const s = new TextDecoder().decode(bytes.subarray(pos, pos + n));
  pos += n;
  return s;
};

pos = 8;
let imported = 0;
const bodies = [];
const names = new Map();
const sections = {};
while (pos < bytes.length) {
  const id = bytes[pos++];
  const size = leb();
  const end = pos + size;
  sections[id] = (sections[id] ?? 0) + size;
  if (id === 2) {
    for (let n = leb(), i = 0; i < n; i++) {
      str();
      str();
      const kind = bytes[pos++];
      if (kind === 0) {
        leb();
        imported++;
      } else if (kind === 1) {
        pos++;
        const f = bytes[pos++];
        leb();
        if (f & 1) leb();
      } else if (kind === 2) {
        const f = bytes[pos++];
        leb();
        if (f & 1) leb();
      } else if (kind === 3) pos += 2;
      else if (kind === 4) {
        pos++;
        leb();
      }
    }
  } else if (id === 10) {
    for (let n = leb(), i = 0; i < n; i++) {
      const s = leb();
      bodies.push(s);
      pos += s;
    }
  } else if (id === 0) {
    const name = str();
    if (name === "name") {
      while (pos < end) {
        const sub = bytes[pos++];
        const subSize = leb();
        const subEnd = pos + subSize;
        if (sub === 1) for (let n = leb(), i = 0; i < n; i++) names.set(leb(), str());
        pos = subEnd;
      }
    }
  }
  pos = end;
}

function crateOf(name) {
  // legacy mangling: _ZN<len><ident>… ; v0: _R…; plain names otherwise
  let m = /^_ZN(?:\d+_\$LT\$)?(\d+)([A-Za-z_][A-Za-z0-9_]*)/.exec(name);
  if (m) return m[2].slice(0, Number(m[1]));
  m = /<([a-z_][a-z0-9_]*)::/.exec(name) ?? /^([a-z_][a-z0-9_]*)::/.exec(name);
  if (m) return m[1];
  return name.includes("::") ? name.split("::")[0] : "(other)";
}

const byCrate = new Map();
let total = 0;
bodies.forEach((size, i) => {
  const name = names.get(imported + i) ?? "(unnamed)";
  const c = names.size ? crateOf(name) : "(no name section)";
  byCrate.set(c, (byCrate.get(c) ?? 0) + size);
  total += size;
});
console.log(`file ${bytes.length} B; code ${total} B in ${bodies.length} functions; data ${sections[11] ?? 0} B; names: ${names.size}`);
for (const [c, s] of [...byCrate].sort((a, b) => b[1] - a[1]).slice(0, 25)) console.log(`${String(s).padStart(10)}  ${((100 * s) / total).toFixed(1).padStart(5)} %  ${c}`);
