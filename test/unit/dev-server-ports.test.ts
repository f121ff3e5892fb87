import { describe, expect, it } from 'vitest';
import { startOutput, takenPort } from '../../src/dev-server/dev-server';

// What the Temporal CLI printed when another process took the HTTP API port it had been given.
const HTTP_PORT_TAKEN =
  'msg="failed starting server: ... failed to build *frontend.HTTPAPIServer: ... failed listening for HTTP API on ' +
  '127.0.0.1:44759: listen tcp 127.0.0.1:44759: bind: address already in use"';

describe('a port taken while the dev server starts', () => {
  it('is named, so a picked port can be picked again and a chosen one is not', () => {
    expect(takenPort(HTTP_PORT_TAKEN)).toBe(44759);
    expect(takenPort('listen tcp [::1]:7233: bind: address already in use')).toBe(7233);
  });

  it('is still named when a panic prints pages of stack after it', () => {
    const output = startOutput();
    output.add(`panic: ${HTTP_PORT_TAKEN}\n\ngoroutine 1 [running]:\n`);
    for (let i = 0; i < 200; i++)
      output.add(`go.uber.org/dig.paramList.BuildList(...)\n\t/root/go/pkg/mod/dig.go:${i}\n`);
    expect(takenPort(output.text())).toBe(44759);
    expect(output.text()).toContain('dig.go:199'); // and the end of it
    expect(output.text().length).toBeLessThan(12_100);
  });

  it('is not found in other failures', () => {
    expect(takenPort('temporal server exited with code 1: unable to open database file')).toBeUndefined();
  });
});
