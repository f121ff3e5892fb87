// The workflow bundle's entry point: every workflow type the worker registers.
export { batchWorkflow } from './batch';
export { promptWorkflow } from './prompt';
export { rateBudgetWorkflow } from './rate-budget';
export { noticeWorkflow } from './notice';
