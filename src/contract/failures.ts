// How activities fail, as workflows see it. Imported by workflow code: no Node built-ins.

/** `ApplicationFailure.type` values thrown by activities; workflows branch on them. */
export const FailureType = {
  Unauthorized: 'Unauthorized',
  Forbidden: 'Forbidden',
  RateLimited: 'RateLimited',
  InvalidRequest: 'InvalidRequest',
  NotFound: 'NotFound',
  JobNotFinished: 'JobNotFinished',
  /** The worker's request pacer had no slot in time; retried later, nothing was sent. */
  PacerBusy: 'PacerBusy',
  CsvChanged: 'CsvChanged',
} as const;
