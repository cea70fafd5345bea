/** `n` followed by the singular or plural noun: `1 file`, `3 files`, `2 matches`. */
export function plural(n: number, noun: string, nouns = `${noun}s`): string {
  return `${n} ${n === 1 ? noun : nouns}`;
}

/** Cut `text` to at most `max` characters, marking the cut so nobody mistakes it for the whole line. */
export function clip(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max)}… [${text.length - max} more characters]`;
}
