// An independent JavaScript reference of the original ingest, written from the store
// compatibility contract. It leans on JavaScript's own regex engine, JSON.parse,
// String(), template literals, crypto and JSON.stringify, so the Python port can be
// compared byte for byte. Discovery applies the contract's deliberate deviations
// (relative-path roadmap test; dangling links, undecodable names, links leaving the
// root and loops skipped). It chunks a file reached twice again, as the original did,
// and relies on de-duplication to collapse it.
//
// usage: node reference_ingest.mjs CORPUS_DIR OUT.json

import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";

const utf8 = new TextDecoder("utf-8", { fatal: true });
const lenient = new TextDecoder("utf-8", { ignoreBOM: true });

// Deliberate deviations of our own (corpus/junk.py, corpus/chunking.py): a file whose
// chunks, written as a store of their own, would take more than PER_BYTE x its size +
// ALLOWANCE bytes is refused; so is a roadmap whose title JSON.stringify cannot write
// (RangeError: Maximum call stack size exceeded, a title nested about 4,100 deep
// through objects), which made the original fail at its final write, with no store.
// Nesting depth alone refuses nothing: JSON.parse has no depth limit, and where
// String() overflows on a deep array the original stopped the file (the catch below).
const PER_BYTE = 32;
const ALLOWANCE = 262144;

function withinBound(fileChunks, inputBytes) {
  let written;
  try {
    written = Buffer.byteLength(JSON.stringify(fileChunks, null, 2));
  } catch (error) {
    if (error instanceof RangeError) return false;
    throw error;
  }
  return written <= PER_BYTE * inputBytes + ALLOWANCE;
}

function chunkId(content) {
  return crypto.createHash("sha256").update(content).digest("hex").slice(0, 12);
}

function chunkText(text, area, source, out) {
  let heading;
  for (const paragraph of text.split(/\n\s*\n/)) {
    const content = paragraph.trim();
    const match = content.match(/^\s*#{1,6}\s+(.+?)\s*$/m);
    if (match) heading = match[1].trim();
    if (content.length > 20) {
      out.push({ id: chunkId(content), content, area, source, heading });
    }
  }
}

function chunkRoadmap(text, area, source, out) {
  let data;
  try {
    data = JSON.parse(text);
  } catch {
    return;
  }
  const push = (content) => out.push({ id: chunkId(content), content, area, source, heading: data.title });
  try {
    if (data.title && data.topics) {
      push(`Role: ${data.title} - Description: ${data.description || ""}`);
      for (const topic of data.topics) {
        if (topic.label && ["topic", "subtopic", "title"].includes(topic.type)) {
          push(`Role: ${data.title} - Topic: ${topic.label}${topic.level ? ` (${topic.level})` : ""}`);
        }
      }
    }
  } catch {
    // the original stopped the file here (a TypeError, or String() overflowing the
    // stack on an array nested thousands deep); what was pushed stays
  }
}

function walk(root, dir, rel, area, ancestors, out) {
  const names = fs.readdirSync(dir, { encoding: "buffer" }).sort(Buffer.compare);
  for (const raw of names) {
    let name;
    try {
      name = utf8.decode(raw);
    } catch {
      continue;
    }
    const full = path.join(dir, name);
    const source = `${rel}/${name}`;
    let st;
    try {
      if (fs.lstatSync(full).isSymbolicLink()) {
        const real = fs.realpathSync(full);
        if (real !== root && !real.startsWith(root + path.sep)) continue;
      }
      st = fs.statSync(full, { bigint: true });
    } catch {
      continue;
    }
    if (st.isDirectory()) {
      const key = `${st.dev}:${st.ino}`;
      if (name === "raw" || ancestors.has(key)) continue;
      ancestors.add(key);
      walk(root, full, source, area, ancestors, out);
      ancestors.delete(key);
    } else if (st.isFile()) {
      const fileChunks = [];
      let bytes;
      if (name.endsWith(".md") || name.endsWith(".txt")) {
        bytes = fs.readFileSync(full);
        chunkText(lenient.decode(bytes), area, source, fileChunks);
      } else if (name.endsWith(".json") && (name.startsWith("formatted-") || source.includes("roadmaps"))) {
        bytes = fs.readFileSync(full);
        chunkRoadmap(lenient.decode(bytes), area, source, fileChunks);
      }
      if (fileChunks.length && withinBound(fileChunks, bytes.length)) out.push(...fileChunks);
    }
  }
}

function ingest(corpus) {
  const root = fs.realpathSync(corpus);
  const rootStat = fs.statSync(root, { bigint: true });
  const out = [];
  const names = fs.readdirSync(root, { encoding: "buffer" }).sort(Buffer.compare);
  for (const raw of names) {
    let name;
    try {
      name = utf8.decode(raw);
    } catch {
      continue;
    }
    const full = path.join(root, name);
    let st;
    try {
      if (fs.lstatSync(full).isSymbolicLink()) {
        const real = fs.realpathSync(full);
        if (real !== root && !real.startsWith(root + path.sep)) continue;
      }
      st = fs.statSync(full, { bigint: true });
    } catch {
      continue;
    }
    if (!st.isDirectory()) continue;
    const ancestors = new Set([`${rootStat.dev}:${rootStat.ino}`, `${st.dev}:${st.ino}`]);
    walk(root, full, name, name, ancestors, out);
  }
  const seen = new Set();
  const kept = [];
  for (const chunk of out) {
    if (seen.has(chunk.id)) continue;
    seen.add(chunk.id);
    kept.push(chunk);
  }
  return kept;
}

const [corpus, output] = process.argv.slice(2);
fs.writeFileSync(output, JSON.stringify(ingest(corpus), null, 2));
