// `--price` and `--prices`: the user's prices (the gateway gives none), shared by plan, run, status and results.
import { type Command, InvalidArgumentError, Option } from 'commander';
import { parsePriceFlag, parsePrices, type Price, type Prices } from '../results/prices';
import { fail } from './support';

/** Adds `--price <model=amount>` (repeatable) and `--prices <file>` (VIDBATCH_PRICES). */
export function addPriceFlags(command: Command): Command {
  return command
    .addOption(
      new Option(
        '--price <model=amount>',
        'your price per second of video for a model (`<model>=<amount>`, `<model>@<resolution>=<amount>`, `*` = any model); repeatable; replaces the prices file entry for the same model and resolution (no variable of its own: put prices in a file for VIDBATCH_PRICES)',
      ).argParser((value: string, previous: Price[] | undefined) => {
        try {
          return [...(previous ?? []), parsePriceFlag(value)];
        } catch (err) {
          throw new InvalidArgumentError((err as Error).message);
        }
      }),
    )
    .addOption(
      new Option(
        '--prices <file>',
        'your prices: a CSV (model,resolution,per_second|per_video[,currency]) or JSON file (README "Spend ledger")',
      ).env('VIDBATCH_PRICES'),
    );
}

/** The prices the flags give (undefined: none); a bad prices file exits 2 with the file, line and field. */
export async function pricesFrom(o: { price?: Price[]; prices?: string }): Promise<Prices | undefined> {
  return parsePrices(o).catch(fail);
}
