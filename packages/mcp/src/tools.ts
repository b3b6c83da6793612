// The svc_* tools (docs/api.md): each is the REST route's use case behind the same
// scope, the same gates and the same credit charging (@svc/billing, @svc/jobs), with the REST
// response body as its structured content. Job results never travel through a tool (docs/api.md,
// "Hosted MCP"): the job tools hand out the signed download URL. A refusal is a tool result with
// `isError` whose text is the catalogue's error body (docs/errors.md), `code` included.

import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { ServiceError, type ErrorBody, type ErrorCode } from '@svc/contracts';
import { isConnectionFailure, summarize, upstream, validateAndCharge, type DecisionLog, type DecisionSink } from '@svc/billing';
import type { JobsService } from '@svc/jobs';
import { parseCompanyEnrich, parseFindContact, type DataService } from '@svc/enrich';
import type { DataFamily } from '@svc/contracts';
import type { Store } from '@svc/store';
import type { Verifier } from '@svc/verifier';
import type { AccessContext, McpScope } from './oauth.ts';
import { inputs, outputs, type ToolName } from './schemas.ts';

export interface ToolDeps {
  store: Store;
  verifier: Verifier;
  /** The job pipeline; without it the four job tools are not offered. */
  jobs?: JobsService;
  /** Where validation decisions go (analytics), as for the REST routes. */
  analytics?: DecisionSink;
  /** The data endpoints; without it the data tools are not offered. */
  data?: DataService;
}

export interface ToolCallContext {
  access: AccessContext;
  /** The HTTP request's id: decision ids are `<requestId>:<index>`. */
  requestId: string;
  log: DecisionLog & { error(obj: object, msg: string): void };
}

interface ToolSpec {
  title: string;
  description: string;
  scope: McpScope;
  /** Blocked by an ended subscription (402 subscription_inactive on REST). */
  billable?: boolean;
  needsJobs?: boolean;
  /** A data tool: the account needs the data product, and the family a provider (as the REST route). */
  data?: DataFamily;
}

const TOOLS: Record<ToolName, ToolSpec> = {
  svc_enrich_company: {
    title: 'Company data from a domain',
    description:
      'What a company says about itself in public (its website and DNS): name, description, size and type when it states them, location, social profiles, phone, and the technologies its DNS names. 1 credit when found (cached 30 days, hits charged the same); not found is free. Needs the data product. Same as POST /v1/company/enrich.',
    scope: 'data:company:read',
    billable: true,
    data: 'company',
  },
  svc_find_email: {
    title: "Find a person's email address",
    description:
      "A person's address at a company from their name, proven on the company's mail server. 1 credit when found with confidence 70 or more (catch-all domains without evidence are answered free, below 70); not found is free. Needs the data product. Same as one contact of POST /v1/find/bulk.",
    scope: 'email:find',
    billable: true,
    data: 'finder',
  },
  svc_get_credits: {
    title: 'Credit balance',
    description: 'The credit balance of the account: balance, reserved (held by jobs in progress), available, and the subscription state. Same as GET /v1/credits.',
    scope: 'credits:read',
  },
  svc_validate_email: {
    title: 'Validate one email address',
    description:
      'Validates one address through syntax, DNS, SMTP and catch-all checks. Charges 1 credit only for a High-Value Validation (result `valid`: a personal, non-catch-all address); everything else is free. Same as POST /v1/validate.',
    scope: 'email:validate:single',
    billable: true,
  },
  svc_validate_bulk: {
    title: 'Validate up to 100 email addresses',
    description: 'Validates 1-100 addresses at once; one result per submitted string, in input order, and a summary. Credits as for one address each (a mailbox twice is charged once). Same as POST /v1/validate/bulk.',
    scope: 'email:validate:bulk',
    billable: true,
  },
  svc_create_validation_job: {
    title: 'Start a validation job',
    description:
      'Starts an asynchronous job over a list of addresses (duplicates validated once). One credit per unique address is reserved now; only High-Value Validations are charged when it completes, the rest is refunded. Poll svc_get_job, then get the results CSV with svc_get_job_download_url. Same as POST /v1/validate/batch.',
    scope: 'email:validate:bulk',
    billable: true,
    needsJobs: true,
  },
  svc_get_job: {
    title: 'A job’s status',
    description: 'Status, progress, result counts and credits of one job of the account. Same as GET /v1/csv/jobs/{id}.',
    scope: 'email:validate:bulk',
    needsJobs: true,
  },
  svc_list_jobs: {
    title: 'List jobs',
    description: 'The account’s jobs, newest first, a page at a time (pass next_cursor back as cursor). Same as GET /v1/csv/jobs.',
    scope: 'email:validate:bulk',
    needsJobs: true,
  },
  svc_get_job_download_url: {
    title: 'Results download URL',
    description:
      'A signed URL of a completed job’s results CSV (valid for an hour, no key needed), optionally of some results only. The CSV itself is never returned through this tool: fetch the URL. Same as GET /v1/csv/jobs/{id}/download?mode=url.',
    scope: 'email:validate:bulk',
    needsJobs: true,
  },
};

/** The tools' scopes (for docs/api.md and tests). */
export const TOOL_SCOPES: Record<ToolName, McpScope> = Object.fromEntries(Object.entries(TOOLS).map(([n, t]) => [n, t.scope])) as Record<ToolName, McpScope>;

/** A refusal as a tool result: the error body of docs/errors.md (with its `code`) as the text. */
export function toolError(e: ServiceError): CallToolResult {
  const body: ErrorBody = e.body();
  return { isError: true, content: [{ type: 'text', text: JSON.stringify(body) }] };
}

/**
 * Arguments a tool's input schema refuses, as the REST route refuses the same mistake: the SDK
 * checks them before the tool runs and hands over only its message (`Input validation error:
 * Invalid arguments for tool <name>: <zod issue> at <path>`), so the code is read from that.
 */
export function inputRefusal(message: string): ServiceError {
  const text = message.replace(/^MCP error -?\d+: /, '');
  const m = /Invalid arguments for tool (\w+): (.*) at (\S+)$/m.exec(text);
  const [tool, what, path] = m ? [m[1]!, m[2]!, m[3]!] : ['', '', ''];
  let code: ErrorCode = 'invalid_request';
  if (path === 'email') code = /received undefined/.test(what) ? 'email_required' : 'invalid_email_type';
  else if (path === 'emails') code = /^Too big/.test(what) ? 'too_many_emails' : /^Too small|received undefined/.test(what) ? 'emails_required' : 'invalid_request';
  else if (/^emails(\.\d+|\[\d+\])$/.test(path)) code = tool === 'svc_create_validation_job' ? 'invalid_emails' : 'invalid_email_type';
  return new ServiceError(code, text);
}

/** A success: the REST body as structured content, and as JSON text for clients that read only text. */
function toolResult(name: ToolName, value: unknown): CallToolResult {
  // Parsing through the output schema keeps exactly the REST response's fields.
  const structured = outputs[name].parse(value) as Record<string, unknown>;
  return { structuredContent: structured, content: [{ type: 'text', text: JSON.stringify(structured) }] };
}

/**
 * A new MCP server for one request (the Streamable HTTP transport runs stateless: a server and a
 * transport per request), its tools bound to the request's access token.
 */
export function createMcpServer(deps: ToolDeps, ctx: ToolCallContext): McpServer {
  const server = new McpServer({ name: 'email-validation-service', version: '1.0.0' }, { capabilities: { tools: {} }, instructions: 'Email validation: validate addresses (1 credit per High-Value Validation), run jobs over lists, read credits. Job results are a CSV behind a signed URL.' });
  // The SDK answers arguments that break a tool's input schema itself, with bare text: here they
  // get the catalogue's body and code like every other refusal (its other errors stay as they are).
  const hook = server as unknown as { createToolError(message: string): CallToolResult };
  const sdkToolError = hook.createToolError.bind(server);
  hook.createToolError = (message: string) => (/Input validation error/.test(message) ? toolError(inputRefusal(message)) : sdkToolError(message));
  const { store, verifier, jobs } = deps;
  const accountId = ctx.access.accountId;
  const decisions = deps.analytics ? { decisions: { sink: deps.analytics, requestId: ctx.requestId, source: 'mcp' as const, log: ctx.log } } : {};

  const run = (name: ToolName, handler: (args: any) => Promise<unknown>) => async (args: unknown): Promise<CallToolResult> => {
    const spec = TOOLS[name];
    try {
      // The gates of the REST route, from the token's grant: scope, then subscription.
      if (!ctx.access.scopes.includes(spec.scope)) throw new ServiceError('insufficient_scope', `The access token lacks the ${spec.scope} scope`, { required_scope: spec.scope });
      if (spec.data && !(await store.accounts.dataProduct(accountId))) throw new ServiceError('product_not_enabled');
      if (spec.billable && ctx.access.subscriptionStatus === 'canceled') throw new ServiceError('subscription_inactive');
      if (spec.data) deps.data!.requireFamily(spec.data);
      return toolResult(name, await handler(args));
    } catch (err) {
      if (err instanceof ServiceError) {
        if (err.cause) ctx.log.error({ err: err.cause, code: err.code, tool: name }, 'dependency failed');
        return toolError(err);
      }
      if (isConnectionFailure(err)) {
        ctx.log.error({ err, tool: name }, 'dependency failed');
        return toolError(new ServiceError(spec.billable ? 'validation_upstream_failed' : 'service_unavailable', 'A dependency is unavailable; retry later'));
      }
      ctx.log.error({ err, tool: name }, 'unexpected error');
      return toolError(new ServiceError('internal_error'));
    }
  };

  const register = (name: ToolName, handler: (args: any) => Promise<unknown>) => {
    const spec = TOOLS[name];
    if (spec.needsJobs && !jobs) return;
    if (spec.data && !deps.data) return;
    server.registerTool(
      name,
      { title: spec.title, description: `${spec.description} Scope: ${spec.scope}.`, inputSchema: inputs[name], outputSchema: outputs[name], annotations: { readOnlyHint: !spec.billable, openWorldHint: name.startsWith('svc_validate') } },
      run(name, handler) as never,
    );
  };

  register('svc_get_credits', async () => {
    const b = await store.ledger.balance(accountId);
    if (!b) throw new ServiceError('invalid_access_token', 'The account of this access token no longer exists');
    return b;
  });

  register('svc_validate_email', async ({ email }: { email: string }) => {
    const trimmed = email.trim();
    if (!trimmed) throw new ServiceError('email_required');
    return (await validateAndCharge(store, verifier, accountId, [trimmed], decisions))[0];
  });

  register('svc_validate_bulk', async ({ emails }: { emails: string[] }) => {
    const results = await validateAndCharge(store, verifier, accountId, emails.map((e) => e.trim()), decisions);
    return { results, summary: summarize(results) };
  });

  if (deps.data) {
    const data = deps.data;
    register('svc_enrich_company', async (args: unknown) => data.companyEnrich(accountId, parseCompanyEnrich(args)));
    register('svc_find_email', async (args: { validate?: boolean }) => {
      const contact = parseFindContact(args);
      const r = await data.findBulk(accountId, { items: [{ ok: true, query: contact, input: '0' }], validate: args.validate === true, max_concurrent: 1 }, `find_${ctx.requestId}`);
      return r.results[0];
    });
  }

  if (jobs) {
    register('svc_create_validation_job', async ({ emails, webhook_url }: { emails: string[]; webhook_url?: string }) => {
      const job = await upstream(jobs.createJsonJob(accountId, emails, { webhookUrl: webhook_url ?? null }));
      return { id: job.id, status: 'queued', total_rows: job.total_rows, unique_emails: job.unique_emails, credits_reserved: job.credits_reserved, created_at: job.created_at.toISOString() };
    });

    register('svc_get_job', async ({ job_id }: { job_id: string }) => jobs.status(await jobs.get(accountId, job_id)));

    register('svc_list_jobs', async ({ limit, cursor, status }: { limit?: number; cursor?: string; status?: Parameters<JobsService['list']>[1]['status'] }) => {
      const page = await jobs.list(accountId, { limit: limit ?? 20, ...(cursor !== undefined ? { cursor } : {}), ...(status ? { status } : {}) });
      return { jobs: page.jobs.map((j) => jobs.status(j)), next_cursor: page.next_cursor };
    });

    register('svc_get_job_download_url', async ({ job_id, segment }: { job_id: string; segment?: string }) => jobs.downloadLink(accountId, job_id, segment));
  }

  return server;
}
