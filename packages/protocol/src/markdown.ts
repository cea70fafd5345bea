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

const HEADING = /^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$/;

/**
 * Headings outside fenced blocks and their bodies. A section runs until the next heading of the same or a
 * higher level, so a `### detail` inside `## review.prompt` stays part of the prompt.
 */
export function findSections(text: string, blocks: FencedBlock[] = findFencedBlocks(text)): MarkdownSection[] {
  const lines = splitLines(text);
  const inFence = new Set<number>();
  for (const block of blocks) for (let l = block.startLine; l <= block.endLine; l++) inFence.add(l);
  const headings: { line: number; level: number; heading: string }[] = [];
  lines.forEach((line, index) => {
    if (inFence.has(index)) return;
    const match = HEADING.exec(line);
    if (match?.[1] && match[2] !== undefined) headings.push({ line: index, level: match[1].length, heading: match[2] });
  });
  return headings.map((h, k) => {
    const next = headings.slice(k + 1).find((other) => other.level <= h.level);
    const endLine = next ? next.line : lines.length;
    // The protocol block is not part of any section's text.
    const body = lines
      .slice(h.line + 1, endLine)
      .filter((_, offset) => !inFence.has(h.line + 1 + offset) || !isProtocolLine(blocks, h.line + 1 + offset))
      .join('\n')
      .trim();
    return { id: normalizeSectionId(h.heading), heading: h.heading, level: h.level, body };
  });
}

function isProtocolLine(blocks: FencedBlock[], line: number): boolean {
  return blocks.some((b) => isProtocolFence(b.info) && line >= b.startLine && line <= b.endLine);
}

/** The explicit protocol fence: its info string carries the `agent-protocol` token (e.g. "json agent-protocol"). */
export function isProtocolFence(info: string): boolean {
  return info.split(/\s+/).includes('agent-protocol');
}
