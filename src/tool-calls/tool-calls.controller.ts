import { Body, Controller, Get, Headers, HttpCode, Param, Post, Query, Req, Res } from '@nestjs/common';
import { ApiBearerAuth, ApiBody, ApiHeader, ApiResponse, ApiTags } from '@nestjs/swagger';
import { ApiRoles, forbiddenText, PLATFORM_KEY_BELONGS_TO_NO_ORG } from '../common/http/api-roles.js';
import { ApiProblemResponse, ApiToolCallResponses, TOOL_CALL_BODY_SCHEMA } from '../common/http/openapi.js';
import { socketEnded } from '../common/http/socket-ended.js';
import type { Request, Response } from 'express';
import { CurrentPrincipal, KeyCheckedInWrite, Roles } from '../auth/auth.decorators.js';
import type { Principal } from '../auth/principal.js';
import { ReconcileDto } from '../approvals/approvals.dto.js';
import { RECONCILE_SCHEMA } from '../ops/ops.schemas.js';
import { ReconcileService } from './reconcile.service.js';
import { ToolCallResultsService } from './tool-call-results.service.js';
import { ToolCallResultQuery } from './tool-calls.dto.js';
import { ToolCallsService, type ToolCallResponse } from './tool-calls.service.js';
import { TOOL_USE_SCHEMA } from './tool-use.schema.js';
import { rememberToolCallAnswer } from '../logging/answered-call.js';
import { rememberToolUseId } from '../common/errors/problem-tool-result.js';
import { echoableToolUseId } from './tool-use.js';

/** A tool-call body, with its status and headers; its request line names the call and its errorCode (rememberToolCallAnswer). */
function send(res: Response, r: ToolCallResponse) {
  res.status(r.httpStatus);
  for (const [k, v] of Object.entries(r.headers)) res.setHeader(k, v);
  rememberToolCallAnswer(res, r.body);
  return r.body;
}

@ApiTags('tool-calls')
@ApiBearerAuth()
@Controller('v1')
export class ToolCallsController {
  constructor(
    private readonly calls: ToolCallsService,
    private readonly results: ToolCallResultsService,
    private readonly reconciler: ReconcileService,
  ) {}

  @Post('runs/:runId/tool-calls')
  @KeyCheckedInWrite()
  @Roles('agent', 'admin')
  @ApiRoles(['agent', 'admin'], {
    note:
      'Keys of the run’s org (another org’s run → 404 RUN_NOT_FOUND); an agent key only in a run it started (another agent key’s run → 404 ' +
      'RUN_NOT_FOUND, nothing recorded), an admin key in any run of its org. A platform key (orgId null) has no org: 403 FORBIDDEN.',
    summary: 'One tool_use block',
    forbiddenDocumentedBy: 'ApiToolCallResponses',
  })
  @ApiToolCallResponses(forbiddenText(['agent', 'admin'], PLATFORM_KEY_BELONGS_TO_NO_ORG))
  @ApiHeader({ name: 'Idempotency-Key', required: false, schema: { type: 'string', minLength: 1, maxLength: 255, pattern: '^[\\x20-\\x7e]{1,255}$' }, description: '1-255 printable ASCII (blanks only inside: a header value is read without its leading and trailing ones) holding no credential (an access token\'s or key\'s shape: 400), unique per org and naming a call of one run (sent for another run: 422 IDEMPOTENCY_KEY_REUSED with that call\'s toolCallId, nothing runs); default: run id + tool_use id. The tool_use id names the call in its run whatever key comes with it: sent again under another key or none, it is replayed, never run twice' })
  @ApiBody({ description: 'a tool_use block: {type: "tool_use", id, name, input: {action, ...params}}; anything else is 400 BAD_REQUEST', schema: TOOL_USE_SCHEMA })
  async submit(
    @CurrentPrincipal() p: Principal,
    @Param('runId') runId: string,
    @Body() body: Record<string, unknown>,
    @Headers('idempotency-key') idem: string | undefined,
    @Req() req: Request & { correlationId?: string },
    @Res({ passthrough: true }) res: Response,
  ) {
    rememberToolUseId(res, () => echoableToolUseId(body)); // a problem answered to it carries the model's tool_result (sendProblem)
    return send(res, await this.calls.submit(p, runId, body, idem, req.correlationId ?? 'unknown'));
  }

  @Post('tool-calls/:id/reconcile')
  @HttpCode(200)
  @Roles('ops', 'admin')
  @ApiRoles(['ops', 'admin'], 'An org key reconciles its own org’s calls (another org’s → 404); a platform key (orgId null) any org’s.')
  @ApiResponse({
    status: 200,
    description:
      '{id, status, note}: the call is now succeeded or failed. The same status and note sent again for a call already settled with them ' +
      '(a retry after a lost answer) is answered again, with no second ledger event',
    schema: RECONCILE_SCHEMA,
  })
  @ApiProblemResponse(409, 'NOT_RECONCILABLE: only an indeterminate call can be reconciled (a settled call, unless the same status and note are sent again)')
  reconcile(@CurrentPrincipal() p: Principal, @Param('id') id: string, @Body() dto: ReconcileDto) {
    return this.reconciler.reconcile(p, id, dto);
  }

  // Agent and admin only: the full result is unredacted (PII). Ops read the redacted output in the ledger.
  @Get('tool-calls/:id/result')
  @Roles('agent', 'admin')
  @ApiRoles(['agent', 'admin'], {
    note:
      'An ops key gets 403: the ledger, GET /v1/tool-calls/{id}, has the redacted output. A call of another org → 404; to an agent key, ' +
      'a call of a run it did not start too (even one it is waiting on: the run’s key reads it); an admin key reads every call of its org.',
    summary: 'The full result of a tool call',
    description: 'A long-poll stops as soon as the client goes away.',
  })
  @ApiResponse({
    status: 200,
    description: 'the tool-call body whatever the status, with the full result (in `result`) while it is kept; toolResult.content within the result budget, as on every answer',
    schema: TOOL_CALL_BODY_SCHEMA,
  })
  async result(@CurrentPrincipal() p: Principal, @Param('id') id: string, @Query() q: ToolCallResultQuery, @Res({ passthrough: true }) res: Response) {
    // The long-poll stops, answering what it has, once the client goes away: the response closes before it is written
    // (a reset), or the client's FIN arrives (the server keeps half-closed connections open: createGateway). A FIN
    // cannot be told from a half-close (`nc -N`, `shutdown(SHUT_WR)` once the request is sent): either ends the wait
    // whenever it is read, also before the handler began (while the guard looked the key up: neither event comes again).
    // The FIN, or the connection's close (a reset), is heard through one listener per connection (socketEnded), however
    // many long-polls are pipelined on it: a response queued behind another has no 'close' of its own until its turn.
    const gone = new AbortController();
    const onClose = () => gone.abort();
    const socket = res.req.socket;
    const finned = socketEnded(socket);
    res.once('close', onClose);
    finned.addEventListener('abort', onClose);
    if (socket.destroyed || res.destroyed || socket.readableEnded || finned.aborted) gone.abort();
    try {
      return send(res, await this.results.get(p, id, q.waitMs, gone.signal));
    } finally {
      res.off('close', onClose);
      finned.removeEventListener('abort', onClose);
    }
  }
}
