// A line diff of a section's text before and after a transform (the audit
// record holds both when `[audit] include_content` is on): the longest
// common subsequence of lines, each line kept, removed or added.

/**
 * @param {string} before
 * @param {string} after
 * @returns {Array<{op: " " | "-" | "+", line: string}>}
 */
export function lineDiff(before, after) {
  const a = before.split("\n");
  const b = after.split("\n");
  // common[i][j]: the longest common run of a[i..] and b[j..].
  const common = Array.from({ length: a.length + 1 }, () => new Array(b.length + 1).fill(0));
  for (let i = a.length - 1; i >= 0; i--) {
    for (let j = b.length - 1; j >= 0; j--) {
      common[i][j] = a[i] === b[j] ? common[i + 1][j + 1] + 1 : Math.max(common[i + 1][j], common[i][j + 1]);
    }
  }
  /** @type {Array<{op: " " | "-" | "+", line: string}>} */
  const out = [];
  let i = 0;
  let j = 0;
  while (i < a.length || j < b.length) {
    if (i < a.length && j < b.length && a[i] === b[j]) {
      out.push({ op: " ", line: a[i++] });
      j++;
    } else if (j < b.length && (i === a.length || common[i][j + 1] >= common[i + 1][j])) {
      out.push({ op: "+", line: b[j++] });
    } else {
      out.push({ op: "-", line: a[i++] });
    }
  }
  return out;
}
