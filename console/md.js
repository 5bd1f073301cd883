// A small, safe subset of markdown for the model's answers: paragraphs,
// fenced code, bullet lists, headings, `code`, **bold** and links to http(s)
// only. It builds elements and text nodes; nothing is parsed as HTML, so
// markup in an answer stays the text it is.

import { h } from "./dom.js";

const INLINE = /(`[^`\n]+`)|(\*\*[^*\n]+\*\*)|\[([^\]\n]+)\]\((https?:\/\/[^)\s]+)\)/g;

/**
 * The answer's text as elements.
 * @param {string} text
 * @returns {HTMLElement[]}
 */
export function markdown(text) {
  const out = [];
  const lines = text.split("\n");
  for (let i = 0; i < lines.length; ) {
    const line = lines[i];
    if (line.startsWith("```")) {
      const end = lines.indexOf("```", i + 1);
      const stop = end < 0 ? lines.length : end;
      out.push(h("pre", {}, h("code", {}, lines.slice(i + 1, stop).join("\n"))));
      i = stop + 1;
    } else if (/^[-*] /.test(line)) {
      const items = [];
      for (; i < lines.length && /^[-*] /.test(lines[i]); i++) items.push(h("li", {}, inline(lines[i].slice(2))));
      out.push(h("ul", {}, items));
    } else if (/^#{1,6} /.test(line)) {
      out.push(h("p", { class: "heading" }, h("strong", {}, inline(line.replace(/^#+ /, "")))));
      i++;
    } else if (line.trim() === "") {
      i++;
    } else {
      const para = [];
      for (; i < lines.length && lines[i].trim() !== "" && !/^(```|[-*] |#{1,6} )/.test(lines[i]); i++) para.push(lines[i]);
      out.push(h("p", {}, inline(para.join("\n"))));
    }
  }
  return out;
}

/**
 * One run of text with its inline marks.
 * @param {string} text
 * @returns {Array<Node|string>}
 */
function inline(text) {
  const out = [];
  let at = 0;
  for (const m of text.matchAll(INLINE)) {
    out.push(text.slice(at, m.index));
    if (m[1]) out.push(h("code", {}, m[1].slice(1, -1)));
    else if (m[2]) out.push(h("strong", {}, m[2].slice(2, -2)));
    else out.push(h("a", { href: m[4], rel: "noopener noreferrer", target: "_blank" }, m[3]));
    at = (m.index ?? 0) + m[0].length;
  }
  out.push(text.slice(at));
  return out;
}
