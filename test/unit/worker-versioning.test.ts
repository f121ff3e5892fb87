import { describe, expect, it } from 'vitest';
import { loadWorkerVersioning } from '../../src/config';
import { ConfigError } from '../../src/errors';
import { deploymentOptions } from '../../src/worker/versioning';

describe('loadWorkerVersioning', () => {
  it('is unversioned with neither setting', () => {
    expect(loadWorkerVersioning({})).toBeUndefined();
  });

  it('reads the deployment name and build id, and --make-current', () => {
    expect(
      loadWorkerVersioning({
        VIDBATCH_DEPLOYMENT_NAME: ' vidbatch ',
        VIDBATCH_BUILD_ID: '1.1.0-abc',
        VIDBATCH_MAKE_CURRENT: 'true',
      }),
    ).toEqual({ version: { deploymentName: 'vidbatch', buildId: '1.1.0-abc' }, makeCurrent: true });
    expect(
      loadWorkerVersioning({
        VIDBATCH_DEPLOYMENT_NAME: 'v',
        VIDBATCH_BUILD_ID: 'b',
        VIDBATCH_MAKE_CURRENT: 'no',
      })?.makeCurrent,
    ).toBe(false);
  });

  it('names the missing half', () => {
    expect(() => loadWorkerVersioning({ VIDBATCH_DEPLOYMENT_NAME: 'vidbatch' })).toThrow(
      /VIDBATCH_BUILD_ID is not set/,
    );
    expect(() => loadWorkerVersioning({ VIDBATCH_BUILD_ID: 'b' })).toThrow(
      /VIDBATCH_DEPLOYMENT_NAME is not set/,
    );
    expect(() => loadWorkerVersioning({ VIDBATCH_MAKE_CURRENT: 'true' })).toThrow(ConfigError);
  });

  it("refuses a ':' (Temporal joins name and build with it)", () => {
    expect(() => loadWorkerVersioning({ VIDBATCH_DEPLOYMENT_NAME: 'a:b', VIDBATCH_BUILD_ID: 'b' })).toThrow(
      /VIDBATCH_DEPLOYMENT_NAME must be/,
    );
  });
});

describe('deploymentOptions', () => {
  it('versions the worker; what a workflow does not declare moves to the current build', () => {
    expect(deploymentOptions({ deploymentName: 'd', buildId: 'b' })).toEqual({
      version: { deploymentName: 'd', buildId: 'b' },
      useWorkerVersioning: true,
      defaultVersioningBehavior: 'AUTO_UPGRADE',
    });
  });
});
