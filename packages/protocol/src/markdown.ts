/**
 * The small slice of Markdown the protocol needs: fenced code blocks (CommonMark fence rules) and ATX
 * headings outside fences. No Markdown library: the protocol package stays dependency-light and pure.
 */

export interface FencedBlock {
  /** The info string after the opening fence, e.g. "json agent-protocol". */
  info: string;
  content: string;
  /** 0-based line indexes of the opening and closing fence (closing = last line when unterminated). */
  startLine: number;
  endLine: number;
  closed: boolean;
}

const FENCE_OPEN = /^ {0,3}(`{3,}|~{3,})(.*)$/;

export function splitLines(text: string): string[] {
  return text.split(/\r\n|\r|\n/);
}

export function findFencedBlocks(text: string): FencedBlock[] {
  const lines = splitLines(text);
  const blocks: FencedBlock[] = [];
  let i = 0;
  while (i < lines.length) {
    const open = FENCE_OPEN.exec(lines[i] ?? '');
    const fence = open?.[1];
    const info = (open?.[2] ?? '').trim();
    // A backtick fence's info string may not contain backticks (CommonMark), so `` ```a``` `` is inline code.
    if (!open || fence === undefined || (fence.startsWith('`') && info.includes('`'))) {
      i++;
      continue;
    }
    const closing = new RegExp(`^ {0,3}${fence[0] === '`' ? '`' : '~'}{${fence.length},}\\s*$`);
    let j = i + 1;
    while (j < lines.length && !closing.test(lines[j] ?? '')) j++;
    const closed = j < lines.length;
    blocks.push({
      info,
      content: lines.slice(i + 1, closed ? j : lines.length).join('\n'),
      startLine: i,
      endLine: closed ? j : lines.length - 1,
      closed,
    });
    i = j + 1;
  }
  return blocks;
}

export interface MarkdownSection {
  id: string;
  heading: string;
  level: number;
  body: string;
}

/**
 * Normalized heading text, the id an `md:` reference names: trimmed, lower-cased, backticks removed, runs of
 * whitespace turned into "_". So "## Review_toolbar.prompt" and "## review_toolbar.prompt" are the same id.
 */
export function normalizeSectionId(heading: string): string {
  return heading.replace(/`/g, '').trim().toLowerCase().replace(/\s+/g, '_');
}

const HEADING_OPEN = /^ {0,3}(#{1,6})[ \t]+/;

const isBlank = (ch: string | undefined) => ch === ' ' || ch === '\t';

/**
 * An ATX heading: level and text without the optional closing `#`s. Scanned by hand: the equivalent regex
 * (`(.*?)(?:[ \t]+#+)?[ \t]*$`) backtracks quadratically on a long line of spaces, and lines come from the model.
 */
function atxHeading(line: string): { level: number; heading: string } | undefined {
  const open = HEADING_OPEN.exec(line);
  if (!open?.[1]) return undefined;
  const text = line.slice(open[0].length);
  let end = text.length;
  while (end > 0 && isBlank(text[end - 1])) end -= 1;
  let hashes = end;
  while (hashes > 0 && text[hashes - 1] === '#') hashes -= 1;
  if (hashes < end && hashes > 0 && isBlank(text[hashes - 1])) {
    end = hashes;
    while (end > 0 && isBlank(text[end - 1])) end -= 1;
  }
  return { level: open[1].length, heading: text.slice(0, end) };
}

/**
 * Headings outside fenced blocks and their bodies. A section runs until the next heading of the same or a
 * higher level, so a `### detail` inside `## review.prompt` stays part of the prompt.
 */
export function findSections(text: string, blocks: FencedBlock[] = findFencedBlocks(text)): MarkdownSection[] {
  const lines = splitLines(text);
  const inFence = new Set<number>();
  const protocolLines = new Set<number>();
  for (const block of blocks) {
    const lineSet = isProtocolFence(block.info) ? protocolLines : inFence;
    for (let l = block.startLine; l <= block.endLine; l++) lineSet.add(l);
  }
  const headings: { line: number; level: number; heading: string }[] = [];
  lines.forEach((line, index) => {
    if (inFence.has(index) || protocolLines.has(index)) return;
    const found = atxHeading(line);
    if (found) headings.push({ line: index, ...found });
  });
  // Index loops, not slice().find(): a message of many headings must cost linear time, not quadratic.
  return headings.map((h, k) => {
    let next = k + 1;
    while (next < headings.length && (headings[next]?.level ?? 0) > h.level) next++;
    const endLine = headings[next]?.line ?? lines.length;
    // The protocol block is not part of any section's text.
    const body = lines
      .slice(h.line + 1, endLine)
      .filter((_, offset) => !protocolLines.has(h.line + 1 + offset))
      .join('\n')
      .trim();
    return { id: normalizeSectionId(h.heading), heading: h.heading, level: h.level, body };
  });
}

/** The explicit protocol fence: its info string carries the `agent-protocol` token (e.g. "json agent-protocol"). */
export function isProtocolFence(info: string): boolean {
  return info.split(/\s+/).includes('agent-protocol');
}
