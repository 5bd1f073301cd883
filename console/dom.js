// Building the page: every string becomes a text node, never markup. This is
// the console's one way to put model, client or host text on the page.

/**
 * An element with attributes and children. Attributes go through
 * setAttribute (event handlers through `on`), children that are strings
 * become text nodes.
 * @template {keyof HTMLElementTagNameMap} K
 * @param {K} tag
 * @param {Record<string, any>} [attrs]
 * @param {...(Node|string|number|null|undefined|false|Array<any>)} children
 * @returns {HTMLElementTagNameMap[K]}
 */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "on") {
      for (const [event, handler] of Object.entries(value)) el.addEventListener(event, handler);
    } else if (key === "value") {
      /** @type {any} */ (el).value = value;
    } else {
      el.setAttribute(key, value === true ? "" : String(value));
    }
  }
  append(el, children);
  return el;
}

/**
 * @param {Node} parent
 * @param {Array<any>} children
 */
export function append(parent, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    parent.appendChild(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/**
 * Replaces an element's children.
 * @param {Node} parent
 * @param {...any} children
 */
export function replace(parent, ...children) {
  while (parent.firstChild) parent.removeChild(parent.firstChild);
  append(parent, children);
}

/**
 * A text the host sends as a string or as `{markdown}`, as plain text.
 * @param {any} value
 * @returns {string}
 */
export function plainText(value) {
  if (typeof value === "string") return value;
  if (value && typeof value.markdown === "string") return value.markdown;
  if (value && typeof value.value === "string") return value.value;
  return value === undefined || value === null ? "" : JSON.stringify(value);
}
