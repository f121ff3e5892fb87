// Headings of the option groups in a command's `--help`, shared so `run`, `retry-failed` and the price flags
// read alike.
export const GROUP = {
  output: 'Output:',
  guardRails: 'Guard rails:',
  spendSafety: 'Spend safety:',
  rateBudget: 'Rate budget:',
  cost: 'Cost:',
  enhance: 'Prompt enhancement:',
  notices: 'Notices:',
} as const;
