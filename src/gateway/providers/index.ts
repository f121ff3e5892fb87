// The providers GATEWAY_PROVIDER names. The first is the default: batches on it keep the targets (and so the
// batch ids) they had before there was a choice.
import type { ProviderAdapter } from '../provider';
import { fal } from './fal';
import { modelGateway } from './model-gateway';
import { openAiVideos } from './openai-videos';
import { replicate } from './replicate';

export const PROVIDERS: readonly ProviderAdapter[] = [modelGateway, openAiVideos, fal, replicate];

export const DEFAULT_PROVIDER = modelGateway;

/** The provider of that name, or undefined. */
export function providerNamed(name: string): ProviderAdapter | undefined {
  return PROVIDERS.find((p) => p.name === name);
}
