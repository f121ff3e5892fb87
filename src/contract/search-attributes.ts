// vidbatch's custom search attributes. Imported by workflow code: no Node built-ins.
import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';

/** Custom search attributes; the dev-server launcher and docker-compose register exactly these. */
export const BatchIdAttr = defineSearchAttributeKey('BatchId', SearchAttributeType.KEYWORD);
export const StateAttr = defineSearchAttributeKey('VidbatchState', SearchAttributeType.KEYWORD);
export const SEARCH_ATTRIBUTES = [
  { name: BatchIdAttr.name, type: 'Keyword' },
  { name: StateAttr.name, type: 'Keyword' },
] as const;
