import { Marked } from 'marked';

/**
 * Text rendering without a DOM (so it is unit-tested in Node): Markdown through marked with raw HTML escaped and
 * only safe links, and JSON with token classes. Everything is escaped before markup is added.
 */

export const escapeHtml = (s: string) =>
  s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;').replace(/'/g, '&#39;');

const SAFE_URL = /^(https?:|mailto:|#|\/(?!\/))/i;

/** Markdown without raw HTML: HTML in the source is shown as text, links only to http(s)/mailto/relative. */
const markdown = new Marked({
  async: false,
  gfm: true,
  breaks: false,
  renderer: {
    html(token) {
      return escapeHtml(token.text);
    },
    link(token) {
      const text = this.parser.parseInline(token.tokens);
      if (!SAFE_URL.test(token.href)) return text;
      const title = token.title ? ` title="${escapeHtml(token.title)}"` : '';
      return `<a href="${escapeHtml(token.href)}"${title} rel="noopener noreferrer" target="_blank">${text}</a>`;
    },
    image(token) {
      return escapeHtml(token.text ? `[image: ${token.text}]` : '[image]');
    },
  },
});

export function renderMarkdown(source: string): string {
  return markdown.parse(source) as string;
}

/** JSON with token classes (keys, strings, numbers, literals); escaped before any markup is added. */
export function highlightJson(text: string): string {
  return escapeHtml(text).replace(
    /(&quot;(?:\\.|(?!&quot;)[^\\])*&quot;)(\s*:)?|\b(true|false|null)\b|(-?\b\d+(?:\.\d+)?(?:[eE][+-]?\d+)?\b)/g,
    (match, str: string | undefined, colon: string | undefined, lit: string | undefined, num: string | undefined) => {
      if (str) return colon ? `<span class="j-key">${str}</span>${colon}` : `<span class="j-str">${str}</span>`;
      if (lit) return `<span class="j-lit">${lit}</span>`;
      if (num) return `<span class="j-num">${num}</span>`;
      return match;
    },
  );
}
