import { isAbsolute, resolve } from 'node:path';

/**
 * The absolute form of a tool module spec: a relative path is resolved against `baseDir` (the config file's
 * folder), so a binding names the same module from any working directory; a package name stays as it is.
 */
export function absoluteModuleSpec(spec: string, baseDir: string): string {
  return spec.startsWith('.') || isAbsolute(spec) ? resolve(baseDir, spec) : spec;
}
