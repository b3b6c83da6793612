// Summarises V8 heap snapshots (.heapsnapshot, as v8.writeHeapSnapshot writes them) by
// constructor: the self size and count of each node type and name, largest first. The file is
// scanned as bytes (its nodes array is a flat list of integers), so a snapshot larger than the
// largest string V8 can hold is read as well.
//
//   node --import tsx bench/lib/heap-summary.ts a.heapsnapshot [b.heapsnapshot …] [--top 25] [--retainers string]

import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';

export interface HeapGroup {
  type: string;
  name: string;
  count: number;
  selfBytes: number;
}

/** Integers of the JSON array that starts at `from` (just after its `[`), up to its `]`. */
function intArray(buf: Buffer, from: number): { values: Float64Array; end: number } {
  let cap = 1 << 20;
  let values = new Float64Array(cap);
  let n = 0;
  let cur = 0;
  let inNum = false;
  let i = from;
  for (; i < buf.length; i++) {
    const c = buf[i]!;
    if (c >= 48 && c <= 57) {
      cur = cur * 10 + (c - 48);
      inNum = true;
    } else {
      if (inNum) {
        if (n === cap) {
          const next = new Float64Array((cap *= 2));
          next.set(values);
          values = next;
        }
        values[n++] = cur;
        cur = 0;
        inNum = false;
      }
      if (c === 93) break; // ]
    }
  }
  return { values: values.subarray(0, n), end: i };
}

/**
 * `retainersOf`: for the nodes of that type (e.g. 'string'), their self size grouped by what holds
 * them: the holder's type and constructor and the edge's name (one level up, every retainer).
 */
export function summarise(file: string, retainersOf?: string): { groups: HeapGroup[]; totalBytes: number; nodes: number; retainers?: HeapGroup[] } {
  const buf = readFileSync(file);
  const nodesAt = buf.indexOf('"nodes":[');
  const meta = JSON.parse(`${buf.toString('utf8', 0, nodesAt).replace(/,\s*$/, '')}}`) as { snapshot: { meta: { node_fields: string[]; node_types: [string[], ...unknown[]] } } };
  const fields = meta.snapshot.meta.node_fields;
  const types = meta.snapshot.meta.node_types[0];
  const { values: nodes } = intArray(buf, nodesAt + '"nodes":['.length);
  const stringsAt = buf.indexOf('"strings":[');
  const strings = JSON.parse(buf.toString('utf8', stringsAt + '"strings":'.length, buf.lastIndexOf(']') + 1)) as string[];
  const width = fields.length;
  const fType = fields.indexOf('type');
  const fName = fields.indexOf('name');
  const fSize = fields.indexOf('self_size');
  const groups = new Map<string, HeapGroup>();
  let totalBytes = 0;
  for (let i = 0; i < nodes.length; i += width) {
    const type = types[nodes[i + fType]!] ?? '?';
    // Objects and closures by constructor name; strings, code, arrays and the rest by type.
    const name = type === 'object' || type === 'closure' || type === 'native' || type === 'hidden' ? (strings[nodes[i + fName]!] ?? '?').slice(0, 80) : '';
    const size = nodes[i + fSize]!;
    totalBytes += size;
    const key = `${type}\u0000${name}`;
    const g = groups.get(key);
    if (g) {
      g.count++;
      g.selfBytes += size;
    } else groups.set(key, { type, name, count: 1, selfBytes: size });
  }
  const sorted = [...groups.values()].sort((a, b) => b.selfBytes - a.selfBytes);
  if (!retainersOf) return { groups: sorted, totalBytes, nodes: nodes.length / width };
  const edgeFields = (meta.snapshot.meta as unknown as { edge_fields: string[]; edge_types: [string[]] }).edge_fields;
  const edgeTypes = (meta.snapshot.meta as unknown as { edge_types: [string[]] }).edge_types[0];
  const edgesAt = buf.indexOf('"edges":[');
  const { values: edges } = intArray(buf, edgesAt + '"edges":['.length);
  const eWidth = edgeFields.length;
  const eType = edgeFields.indexOf('type');
  const eName = edgeFields.indexOf('name_or_index');
  const eTo = edgeFields.indexOf('to_node');
  const fEdges = fields.indexOf('edge_count');
  const nodeName = (i: number) => {
    const type = types[nodes[i + fType]!] ?? '?';
    return type === 'object' || type === 'closure' || type === 'native' || type === 'hidden' || type === 'array' ? `${type} ${(strings[nodes[i + fName]!] ?? '?').slice(0, 60)}` : type;
  };
  const by = new Map<string, HeapGroup>();
  let e = 0;
  for (let i = 0; i < nodes.length; i += width) {
    const count = nodes[i + fEdges]!;
    for (let k = 0; k < count; k++, e += eWidth) {
      const to = edges[e + eTo]!;
      if (types[nodes[to + fType]!] !== retainersOf) continue;
      const et = edgeTypes[edges[e + eType]!];
      if (et === 'weak') continue;
      const name = et === 'element' || et === 'hidden' ? `[${et}]` : String(strings[edges[e + eName]!] ?? '?').slice(0, 40);
      const key = `${nodeName(i)} .${name}`;
      const g = by.get(key);
      const size = nodes[to + fSize]!;
      if (g) {
        g.count++;
        g.selfBytes += size;
      } else by.set(key, { type: nodeName(i), name: `.${name}`, count: 1, selfBytes: size });
    }
  }
  return { groups: sorted, totalBytes, nodes: nodes.length / width, retainers: [...by.values()].sort((a, b) => b.selfBytes - a.selfBytes) };
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const args = process.argv.slice(2);
  const topAt = args.indexOf('--top');
  const top = topAt >= 0 ? Number(args.splice(topAt, 2)[1]) : 25;
  const retAt = args.indexOf('--retainers');
  const retainersOf = retAt >= 0 ? args.splice(retAt, 2)[1] : undefined;
  for (const file of args) {
    const s = summarise(file, retainersOf);
    console.log(`\n${file}: ${(s.totalBytes / 2 ** 20).toFixed(1)} MiB self size in ${s.nodes} nodes`);
    console.log('     MiB     count  type / constructor');
    for (const g of s.groups.slice(0, top)) console.log(`${(g.selfBytes / 2 ** 20).toFixed(2).padStart(8)} ${String(g.count).padStart(9)}  ${g.type}${g.name ? ` ${g.name}` : ''}`);
    if (s.retainers) {
      console.log(`  ${retainersOf} nodes by holder (holder type and constructor, edge name):`);
      for (const g of s.retainers.slice(0, top)) console.log(`${(g.selfBytes / 2 ** 20).toFixed(2).padStart(8)} ${String(g.count).padStart(9)}  ${g.type} ${g.name}`);
    }
  }
}
