import { estimateTokens } from '@oar/protocol';
import { TokensCountArgsSchema } from '@oar/runner-sdk';
import type { AuditTarget } from './run-session.js';
import { apiError, type RunSession } from './run-session.js';

/** The name of the estimate tokens.count answers with (it is OAR's, not a provider tokenizer's). */
export const TOKEN_ESTIMATE_METHOD = 'oar_estimate';

/**
 * tokens.count: OAR's own token estimate (`estimateTokens`, the one every budget uses: no tokenizer, the same
 * answer everywhere) of what a models.invoke with these arguments would send — each message's content, its tool
 * calls' names and arguments, and each tool's name, description and JSON schema. Always said to be an estimate
 * (`estimate: true`): a provider's tokenizer counts differently. Granted like the model call itself: the model must
 * be among the run's resources and `invoke` or `stream` granted. Nothing is sent to a provider and nothing recorded
 * beyond the call's audit.
 */
export async function tokensCount(session: RunSession, payload: Record<string, unknown>, audit: AuditTarget) {
  const parsed = TokensCountArgsSchema.safeParse(payload);
  if (typeof payload.model_id === 'string') audit.resource = payload.model_id.slice(0, 128);
  audit.scope = 'model';
  if (!parsed.success) throw apiError('invalid_argument', 'tokens.count takes {model_id, messages, tools?}');
  const { access } = session;
  if (!access.modelOps.some((op) => op === 'invoke' || op === 'stream')) {
    throw apiError('unauthorized', 'tokens.count needs models.invoke or models.stream granted to this run');
  }
  const { model_id: modelId, messages, tools } = parsed.data;
  if (!access.models.includes(modelId)) {
    throw apiError('unauthorized', `model ${modelId} is not among this run's resources`, { model_id: modelId });
  }
  let tokens = 0;
  for (const message of messages) {
    tokens += estimateTokens(message.content);
    for (const call of message.tool_calls ?? []) tokens += estimateTokens(call.name) + estimateTokens(call.arguments);
  }
  for (const tool of tools ?? []) {
    tokens += estimateTokens(`${tool.name}\n${tool.description ?? ''}\n${JSON.stringify(tool.parameters ?? {})}`);
  }
  return { tokens, estimate: true, method: TOKEN_ESTIMATE_METHOD };
}
