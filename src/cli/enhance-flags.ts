// `--enhance`, `--enhance-model`, `--enhance-instructions` (`plan` and `run`): each row's prompt rewritten once
// through the gateway's chat completions before its video is paid for (docs/enhance-prompts.md). Resolved
// here, once, into the batch's options (the model and the instructions' text); workflows apply no defaults.
import { readFile } from 'node:fs/promises';
import { type Command, Option } from 'commander';
import {
  DEFAULT_ENHANCE_INSTRUCTIONS,
  DEFAULT_ENHANCE_MODEL,
  type EnhanceOptions,
} from '../contract/enhance';
import { ConfigError } from '../errors';
import { GROUP } from './help-groups';
import { fail } from './support';

/** The most instructions text sent with every rewrite (it travels in each prompt's history). */
const MAX_INSTRUCTIONS_BYTES = 16 * 1024;

export function addEnhanceFlags(command: Command, what: string): Command {
  return command
    .addOption(
      new Option(
        '--enhance',
        `${what}: each row's prompt rewritten once through the gateway's chat completions (adds camera, lighting and motion detail; invents no subject), kept in <out-root>/enhanced/; rows of a CSV with an original_prompt column are sent as they are (docs/enhance-prompts.md)`,
      ).helpGroup(GROUP.enhance),
    )
    .addOption(
      new Option(
        '--enhance-model <id>',
        `with --enhance: the chat model that rewrites (default ${DEFAULT_ENHANCE_MODEL}, the simulator's; set one your gateway serves)`,
      )
        .helpGroup(GROUP.enhance)
        .hideHelp(),
    )
    .addOption(
      new Option(
        '--enhance-instructions <file>',
        'with --enhance: a text file with the system prompt sent before each prompt (default: the built-in one, docs/enhance-prompts.md)',
      )
        .helpGroup(GROUP.enhance)
        .hideHelp(),
    );
}

/** The enhancement the flags ask for (undefined without --enhance); a bad flag exits 2 naming it. */
export async function enhanceFrom(o: Record<string, unknown>): Promise<EnhanceOptions | undefined> {
  const model = o.enhanceModel as string | undefined;
  const file = o.enhanceInstructions as string | undefined;
  if (!o.enhance) {
    if (model !== undefined || file !== undefined)
      fail(
        new ConfigError(
          `${model !== undefined ? '--enhance-model' : '--enhance-instructions'} needs --enhance`,
        ),
      );
    return undefined;
  }
  if (model !== undefined && !/^[\w.:/-]{1,200}$/.test(model))
    fail(new ConfigError(`option '--enhance-model <id>' argument '${model}' is not a model id`));
  let instructions = DEFAULT_ENHANCE_INSTRUCTIONS;
  if (file !== undefined) {
    try {
      instructions = (await readFile(file, 'utf8')).trim();
    } catch (err) {
      fail(
        new ConfigError(
          `option '--enhance-instructions <file>': cannot read ${file} (${(err as NodeJS.ErrnoException).code ?? String(err)})`,
        ),
      );
    }
    if (!instructions) fail(new ConfigError(`option '--enhance-instructions <file>': ${file} is empty`));
    if (Buffer.byteLength(instructions) > MAX_INSTRUCTIONS_BYTES)
      fail(
        new ConfigError(
          `option '--enhance-instructions <file>': ${file} is over ${MAX_INSTRUCTIONS_BYTES / 1024} KiB`,
        ),
      );
  }
  return { model: model ?? DEFAULT_ENHANCE_MODEL, instructions };
}
