// `--price` and `--prices`: the user's prices (the gateway gives none), shared by plan, run, status, results
// and review. Values are read when the command runs (results/prices loads a CSV parser and zod, which
// `--help` does not need).
import { type Command, Option } from 'commander';
import type { Prices } from '../results/prices';
import { ConfigError } from '../errors';
import { GROUP } from './help-groups';
import { fail } from './support';

const PRICE_FLAG = '--price <model=amount>';

/** Adds `--prices <file>` (VIDBATCH_PRICES) and `--price <model=amount>` (repeatable, hidden when `hidePrice`). */
export function addPriceFlags(command: Command, { hidePrice = false } = {}): Command {
  const price = new Option(
    PRICE_FLAG,
    'your price per second of video for a model (`<model>=<amount>`, `<model>@<resolution>=<amount>`, `*` = any model); repeatable; replaces the prices file entry for the same model and resolution (no variable of its own: put prices in a file for VIDBATCH_PRICES)',
  )
    .helpGroup(GROUP.cost)
    .argParser((value: string, previous: string[] | undefined) => [...(previous ?? []), value]);
  return command
    .addOption(
      new Option(
        '--prices <file>',
        'your prices: a CSV (model,resolution,per_second|per_video[,currency]) or JSON file (README "Spend ledger")',
      )
        .helpGroup(GROUP.cost)
        .env('VIDBATCH_PRICES'),
    )
    .addOption(hidePrice ? price.hideHelp() : price);
}

/**
 * The prices the flags give (undefined: none). A bad `--price`, or a bad prices file (with its file, line and
 * field), exits 2 before anything starts, as a bad value of any other flag does.
 */
export async function pricesFrom(o: { price?: string[]; prices?: string }): Promise<Prices | undefined> {
  const { parsePriceFlag, parsePrices } = await import('../results/prices');
  const price = (o.price ?? []).map((value) => {
    try {
      return parsePriceFlag(value);
    } catch (err) {
      return fail(
        new ConfigError(`option '${PRICE_FLAG}' argument '${value}' is invalid. ${(err as Error).message}`),
      );
    }
  });
  return parsePrices({ price, ...(o.prices ? { prices: o.prices } : {}) }).catch(fail);
}
