// The agent's quantisation, written independently in JavaScript: normalise by the norm
// summed left to right in doubles, then Math.round(v * 127) clamped to +-127.
// stdin: JSON array of rows (numbers as written by Python's repr); stdout: int rows.
import { readFileSync } from "node:fs";

const rows = JSON.parse(readFileSync(0, "utf8"));
const out = rows.map((row) => {
  let sum = 0;
  for (const x of row) sum += x * x;
  const norm = Math.sqrt(sum);
  if (norm === 0) return row.map(() => 0);
  return row.map((x) => {
    const q = Math.round((x / norm) * 127);
    return Math.max(-127, Math.min(127, q)) | 0;
  });
});
process.stdout.write(JSON.stringify(out));
