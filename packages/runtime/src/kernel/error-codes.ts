/**
 * Every error code OAR produces, in one table: what it means, whether the same request may succeed later, the
 * `oar` exit status when a command fails with it, and what to do. docs/errors.md is this table in prose; a test
 * keeps the two, and the codes used in the source, in step.
 *
 * `exit: null` marks a code that is recorded, not thrown at the caller: it lands on an action, a turn or a
 * warning in the log (the model sees it, `inspect` shows it), and `oar run` reports the turn's outcome instead
 * (exit 1 when the turn failed, 130 when it was cancelled).
 */
export interface ErrorCodeInfo {
  exit: number | null;
  /**
   * Whether the same request may succeed later unchanged. `'depends'`: some causes pass and some do not, so each
   * error says it itself (`help` says which); every other code's errors carry exactly this flag (a test reads the
   * source to keep them in step).
   */
  retryable: boolean | 'depends';
  /** What it means and what to do, in one or two sentences. */
  help: string;
}

/** The exit statuses of `oar`, by meaning (sysexits.h where one fits). */
export const EXIT = {
  ok: 0,
  /** The turn failed, the checked input is not ok, replay found differences. */
  failed: 1,
  /** Bad input: a usage mistake, an invalid argument, config or id. Fix the input; retrying will not help. */
  usage: 2,
  /** The turn waits for a decision (`oar respond`). */
  waiting: 3,
  /** A bug in OAR (EX_SOFTWARE). */
  internal: 70,
  /** The store failed (EX_IOERR): full, read-only, unreachable. */
  store: 74,
  /** Try again later (EX_TEMPFAIL): somebody else is driving the thread, or the runtime is closing. */
  later: 75,
  /** The turn was interrupted (128 + SIGINT). */
  cancelled: 130,
} as const;

const usage = (help: string): ErrorCodeInfo => ({ exit: EXIT.usage, retryable: false, help });
const recorded = (help: string, retryable: ErrorCodeInfo['retryable'] = false): ErrorCodeInfo => ({
  exit: null,
  retryable,
  help,
});

export const ERROR_CODES = {
  // Configuration, arguments and ids (exit 2).
  usage_error: usage('The command line is wrong (unknown option, missing argument); details.reason says how.'),
  invalid_option: usage('A CLI option has an invalid value or contradicts another. The message names the option.'),
  invalid_config: usage('The configuration file does not match its schema; details list each problem with its path.'),
  config_unreadable: usage('The configuration file cannot be read or is not JSON. Check the path and its syntax.'),
  invalid_json: usage('An input file is not valid JSON.'),
  file_unreadable: usage('An input file named on the command line cannot be read.'),
  file_unwritable: usage('An output file named on the command line cannot be written.'),
  config_exists: usage('`oar init` found an oar.config.json and left it as it is; pass --force to overwrite it.'),
  input_too_large: usage(
    'An input (a CLI input, a config file, a model script) is larger than its documented limit (details: limit, size). Pass a smaller one.',
  ),
  input_too_deep: usage(
    'A JSON input (a CLI input, a config file, a model script) nests arrays and objects deeper than the documented limit (details: limit).',
  ),
  unknown_schema: usage('`oar schema` was asked for a schema it does not have; the message lists them.'),
  invalid_catalog: usage('A tool/agent catalog file does not match the catalog schema.'),
  invalid_transcript_input: usage('The input of `oar protocol transcript` is not a transcript.'),
  model_required: usage('No model is configured for the agent. Pass --model or set "model" in the configuration.'),
  unknown_model: usage('The model spec names a provider or model entry that does not exist.'),
  invalid_model_config: usage('A model entry in the configuration is invalid (for example a key given as a value).'),
  model_credentials_missing: usage("The model's API key variable is not set in the environment."),
  invalid_model_script: usage('A scripted model file (script:FILE) does not match the script schema.'),
  unknown_agent: usage('The agent name is not in the binding. `oar session show` lists the agents.'),
  unknown_runner: usage('No package in runners.packages provides the runner id. `oar runners list` shows the runners.'),
  invalid_tool_module: usage('A tool module does not export valid tools.'),
  tool_module_unloadable: usage('A tool module failed to load (not found, or it threw on import).'),
  duplicate_tool: usage('Two tools have the same name.'),
  invalid_tool_schema: usage("A tool's input schema is not a valid JSON Schema."),
  unsupported_store: usage('The store URL has a scheme OAR does not support (only postgres:// and SQLite files).'),
  invalid_store: usage('The store URL is malformed, or its schema name is invalid.'),
  store_not_found: usage(
    'A command that reads found no store where it looked (no SQLite file; no OAR tables in the PostgreSQL database or schema) and created none. The message names the place; pass --store URL or set OAR_STORE to look in another.',
  ),
  workspace_unavailable: usage('The workspace is missing or not a directory. Pass an existing directory.'),
  binding_unavailable: {
    exit: EXIT.usage,
    retryable: 'depends',
    help: "The session's binding cannot run here. Retryable when this process may provide it later (a tool another worker registers, an MCP server or a business CLI that could not be reached or started: details.hint); not when the binding names what it can never have here (a pipeline step's unbound tool, MCP servers in a process without MCP).",
  },
  binding_conflict: usage(
    'A flag contradicts the binding of the session it continues. Use `oar session update` to change it.',
  ),
  binding_changed: {
    exit: EXIT.later,
    retryable: true,
    help: 'The binding changed while the update was prepared (two updates raced); read it again and retry the update.',
  },
  invalid_binding: usage('A binding update is invalid (unknown field or value).'),
  invalid_input: usage('A command argument is invalid (an empty prompt, a malformed id).'),
  invalid_decision: usage('The decision does not fit the pending request (for example approve_for_session).'),
  invalid_state_key: usage('A state key is invalid.'),
  invalid_limit: usage(
    'A budget limit change is invalid: an unknown limit, a value that is not a positive number (null removes a limit), or nothing to change. The message names the limit.',
  ),
  invalid_state_value: usage('A state value is not JSON-serializable or too large.'),
  session_exists: usage('A session with this id already exists.'),
  session_not_found: usage('No session has this id in this store. `oar sessions` lists them.'),
  workspace_not_found: usage('No workspace has this id. `oar workspaces list` (or GET /v1/workspaces) lists them.'),
  workspace_exists: usage('A workspace with this id already exists.'),
  api_key_not_found: usage('No API key of this workspace has this id. `oar keys list` lists them.'),
  artifact_not_found: usage('No artifact of this session has this id (an artifact never crosses sessions).'),
  artifact_expired: usage(
    'The artifact existed but the retention policy expired it: its content is deleted (details: name, size, sha256, expiredAt). Nothing brings it back; re-run what produced it if it is still needed.',
  ),
  // The HTTP API (`oar serve`, docs/http-api.md): the status each code answers with is in that document.
  unauthorized: usage('No API key, or one that is unknown, revoked or expired. Send "Authorization: Bearer <key>".'),
  forbidden: usage(
    "The API key's scope does not allow this route (a viewer key on a write route, a non-admin on keys).",
  ),
  route_not_found: usage('No route of the HTTP API has this method and path. GET /v1/openapi.json lists them.'),
  payload_too_large: usage('The request body is larger than the server accepts (details: limit). Send a smaller one.'),
  range_not_satisfiable: usage('The Range header asks for bytes outside the artifact (details: size).'),
  too_many_requests: {
    exit: EXIT.later,
    retryable: true,
    help: 'The API key made more write requests than its rate limit allows; retry after details.retryAfterSeconds.',
  },
  server_closing: {
    exit: EXIT.later,
    retryable: true,
    help: 'The server is shutting down; reconnect (a stream resumes from its last event id) or retry elsewhere.',
  },
  invalid_api_key: usage(
    'A key given to OAR to store (OAR_ADMIN_KEY) does not have the shape of an OAR API key: "oar_" and 40 letters, digits, "_" or "-".',
  ),
  thread_not_found: usage('No thread of the session has this id.'),
  turn_not_found: usage('No turn of the session (of the thread, when one is named) has this id.'),
  action_not_found: usage('No pending decision has this id; the details list the pending ones.'),
  decision_already_resolved: usage('The decision was already resolved (details: how and when); nothing changed.'),
  interrupts_pending: usage(
    'The AG-UI thread waits for decisions: a run must answer every open interrupt in `resume` (details: interruptIds) before new input; nothing changed.',
  ),
  task_not_found: usage('No task of the session has this id.'),
  process_not_found: usage(
    'write_process_stdin / terminate_process: no running process of the session has this id (unknown, or its end is already recorded).',
  ),
  too_many_process_requests: {
    exit: EXIT.later,
    retryable: true,
    help: 'write_process_stdin / terminate_process: 16 requests of the process already wait for the runtime running it; wait for them to be answered.',
  },
  process_input_closed: usage(
    'write_process_stdin: the process takes no more input (a foreground command, or its standard input was closed).',
  ),
  not_a_permission_request: usage(
    'resolve_permission answers tool approvals only; this pending action is a question: answer it with respond_action.',
  ),
  subagent_not_found: usage('No sub-agent of the session has this id.'),
  subagent_exists: usage('A sub-agent with this id exists, spawned otherwise (details: its parent thread and agent).'),
  subagent_not_closed: usage(
    'The sub-agent is not closed, so there is nothing to reopen: send_subagent_input gives it more to do.',
  ),
  queued_turn_not_found: usage('No queued turn has this id.'),
  nothing_to_compact: usage(
    'The thread has no finished turn after its last compaction boundary; nothing was requested. Compact after a turn ends.',
  ),
  task_not_active: usage('The task has ended (details: status): it cannot be changed, started or ended again.'),
  task_not_retryable: usage('Only a failed, timed out, cancelled or lost task is retried (details: status).'),
  task_exists: usage('A task with this id exists with another definition (the same definition returns the first).'),
  task_cycle: usage('The edge would make a cycle of dependencies or parents (details: taskId, targetId, kind).'),
  task_not_linkable: usage('A dependency is added before the waiting task starts; this one has (details: status).'),
  task_has_parent: usage('The task already has another parent (details: parentTaskId); unlink it first.'),
  relationship_not_found: usage('The task has no edge of this kind to this target; `oar task show` lists its edges.'),
  task_already_started: usage('The task has started (details: status): pause, complete, fail or cancel it instead.'),
  task_not_startable: usage(
    "The task cannot be started or changed this way: it is the runtime's own (the model's or a delegation's), or it ended (retry_task starts a new attempt).",
  ),
  task_paused: usage('The task is paused: resume_task lets it go on.'),
  task_not_paused: usage('The task is not paused, so there is nothing to resume (details: status).'),
  task_cancelling: usage(
    'The task is being cancelled: its running work is stopping and the task then ends cancelled; retry_task starts it again after.',
  ),
  task_not_ended: usage('Only an ended task is archived (details: status): complete, fail or cancel it first.'),
  task_not_running: usage(
    "The runtime's own task (a graph, a delegation, a runner run) is cancelled by stopping its running work, and none runs now: it ends with the turn it belongs to.",
  ),
  thread_closed: usage('The thread is closed and takes no new turns.'),
  job_not_found: usage('No job has this id. `oar jobs list` lists them.'),
  job_too_large: usage('A job takes at most 1,000 items (details: items, max): split the batch into several jobs.'),
  job_running: usage('Only a finished job is retried: cancel it first, or wait for it to finish.'),
  job_nothing_to_retry: usage('The job has no failed or cancelled item to run again.'),
  job_exists: usage('A job of another workspace has the job id given: choose another.'),
  schedule_not_found: usage('No schedule has this id (in this workspace). `oar schedules list` lists them.'),
  schedule_exists: usage(
    'A schedule with this id already exists: choose another id, or remove the old schedule first.',
  ),
  rollback_conflict: usage(
    'A file the rollback would restore changed outside OAR since, or its content before is not stored (details: conflicts). Nothing was changed: restore the files by hand, or roll back with files: keep.',
  ),
  rollback_in_progress: {
    exit: EXIT.later,
    retryable: true,
    help: 'Another rollback of the thread is under way (details: targetTurnId): run that rollback again to finish it.',
  },

  // Conflicts: somebody else is acting (exit 75: try again later).
  thread_busy: { exit: EXIT.later, retryable: true, help: 'Another worker holds the thread. Wait, or queue.' },
  thread_changed: {
    exit: EXIT.later,
    retryable: true,
    help: 'The thread changed while the command was prepared; it is retried internally, then reported.',
  },
  runtime_closing: { exit: EXIT.later, retryable: true, help: 'The runtime is shutting down; run the command again.' },
  wait_timeout: {
    exit: EXIT.later,
    retryable: true,
    help: '`oar wait --timeout` ran out while the session was still running; nothing changed. Wait again.',
  },
  task_still_stopping: {
    exit: EXIT.later,
    retryable: true,
    help: "The paused task's turn is still stopping; resume it once the turn ended (a moment later).",
  },
  job_changed: {
    exit: EXIT.later,
    retryable: true,
    help: 'The job changed while its facts were being recorded (another item ended); it is retried internally, then reported.',
  },
  task_changed: {
    exit: EXIT.later,
    retryable: true,
    help: 'A task changed while the command was prepared; it is retried internally, then reported.',
  },
  limits_changed: {
    exit: EXIT.later,
    retryable: true,
    help: "The session's limits changed while a limit change was prepared; it is retried internally, then reported.",
  },
  session_changed: {
    exit: EXIT.later,
    retryable: true,
    help: "Events were appended while the session's read models were being repaired; it is retried internally, then reported. Run the repair again.",
  },
  lease_lost: {
    exit: EXIT.later,
    retryable: true,
    help: 'This worker lost the lease of the thread it was driving; another worker carries on. Nothing was written.',
  },

  // The store (exit 74).
  store_unavailable: {
    exit: EXIT.store,
    retryable: 'depends',
    help: 'The store cannot be reached or opened. Retryable when the connection was refused or dropped; not when the SQLite file is damaged or cannot be opened, its directory cannot be created, or PostgreSQL refuses the credentials or the database.',
  },
  store_full: {
    exit: EXIT.store,
    retryable: true,
    help: 'The store (disk or database) is full. Free space and resume.',
  },
  store_read_only: {
    exit: EXIT.store,
    retryable: false,
    help: 'The store refuses writes (a read-only file or replica). Point OAR at a writable store and resume.',
  },
  store_migration_failed: {
    exit: EXIT.store,
    retryable: true,
    help: "The store's schema could not be created or upgraded; the message says why.",
  },

  // Bugs (exit 70).
  internal_error: { exit: EXIT.internal, retryable: false, help: 'A bug in OAR. Please report it with the message.' },
  contradictory_fact: {
    exit: EXIT.internal,
    retryable: false,
    help: 'A write would contradict the log (a second terminal fact for a task or turn); it was refused.',
  },

  // Recorded on turns and actions.
  interrupted: recorded(
    "The turn or action was cancelled by an interrupt. Not retryable, except a runner's tool call cut off because its host was closing (the call may run again on the next host).",
    'depends',
  ),
  model_error: recorded('The model provider failed in a way OAR does not classify; details carry what it said.'),
  job_failed: recorded(
    "A runtime start_job action's job ended with items that failed every attempt, or was cancelled (details: jobId, status, counts); the message lists each item's outcome.",
  ),
  model_transient: recorded(
    "The provider failed transiently (HTTP 5xx, 408, a dropped connection); retried under the model's retry policy, then reported.",
    true,
  ),
  model_timeout: recorded(
    "The model did not answer within its call timeout (limits.modelTimeoutMs or the model's timeoutMs); retried, then reported.",
    true,
  ),
  model_rate_limited: recorded(
    "The provider's rate limit answered (HTTP 429); retried after its retry-after (up to limits.modelRetryMaxDelayMs), then reported.",
    true,
  ),
  model_context_overflow: recorded(
    "The request does not fit the model's context window, even after a compaction. Set the model's contextWindow (or lower limits.contextBudgetTokens), or use a model with a larger window.",
  ),
  compaction_failed: recorded(
    'A context compaction could not be completed (its summary could not be stored); the context is unchanged and degrades for budget as before.',
  ),
  model_auth: recorded(
    "The provider refused the credentials (HTTP 401/403). Check the model's API key variable (apiKeyEnv) and its permissions.",
  ),
  model_invalid_request: recorded('The provider rejected the request (HTTP 4xx). Check the model id and its options.'),
  model_content_filtered: recorded("The provider's content filter refused the request."),
  no_model: recorded('No model could serve the agent when the turn ran.'),
  protocol_violation: recorded(
    'The model answered outside the Agent Protocol. As a runtime.warning it is retryable (one corrective retry follows); the turn that fails after that retry is not.',
    'depends',
  ),
  runner_unavailable: recorded(
    'The runner could not be started or its package does not provide it (details.diagnostic says why). `oar runners list` shows the diagnostics.',
  ),
  runner_config_invalid: recorded(
    "The agent's runner binding config does not match the runner's config_schema; details.field names the field.",
  ),
  runner_protocol_error: recorded(
    'The runner broke the wire or the result stream (garbage on stdout, an invalid or oversized frame, a result of another run, too many results); the run was stopped.',
  ),
  runner_result_too_large: recorded(
    'A runner result was larger than 1 MB; the run was stopped. Store large output with artifact.created.',
  ),
  runner_result_ignored: recorded(
    'A warning: a runner result was ignored (an unknown type, a result after the end, a refused state.updated, an action.requested this host does not execute).',
  ),
  runner_no_result: recorded('The runner ended its result stream without run.completed or run.failed.'),
  runner_crashed: recorded(
    'The runner process exited during the run; details and the runner_ended fact carry its exit and stderr.',
    true,
  ),
  runner_timeout: recorded(
    "The run passed its deadline (the binding policy's timeoutMs, default 10 minutes); the runner was cancelled, then its process group killed.",
    true,
  ),
  runner_lost: recorded(
    'The runner was running when its host stopped (a crash); on resume the run is recorded lost and the turn fails, it is never run again.',
  ),
  protocol_fallback_plain_text: recorded('A warning: plain model text was accepted as the answer (policy plain_text).'),
  step_budget_exceeded: recorded('The turn used its maximum number of model steps (limits.maxSteps).'),
  budget_exceeded: recorded(
    'The next model call would exceed a turn or session budget (budgets, onExceeded "fail"); details name the limit and the spend. Raise it with `oar limit`, or start a new session.',
  ),
  actions_failed: recorded('Actions of the graph failed and the model ended the turn on them.'),
  task_failed: recorded("The task's owner failed it (fail_task) without a code of their own; the message is theirs."),
  dependency_failed: recorded('The action was skipped because an action it depends on failed.'),
  graph_aborted: recorded('The action was cancelled because the graph was aborted (failure policy abort).'),
  awaiting_model_decision: recorded('The action was skipped so the model can decide (failure policy ask_model).'),
  lost: recorded('A non-idempotent action was running when its worker died; it was not run again.'),
  executor_unavailable: recorded('No executor can run this kind of action.'),
  no_agent: recorded('The delegated agent is not in the binding.'),
  subagent_depth_exceeded: recorded(
    'A delegation or spawn_subagent would go deeper than limits.maxSubagentDepth (details: depth, maxSubagentDepth).',
  ),
  invalid_human_action: recorded('A human action is malformed.'),
  unknown_reference: recorded('A runtime operation referred to something that does not exist.'),
  unresolved_reference: recorded(
    "An action's context_refs or prompt_ref name a result, input or artifact that is not there.",
  ),
  tool_target_unresolved: recorded('No tool offered to the agent has the capabilities a tool action asks for.'),
  decision_not_applicable: recorded(
    'A decide/revise/report declaration cannot apply to the thread as it is; the model gets one corrective retry.',
    true,
  ),
  not_happened: recorded(
    "A lost action was reconciled: it did not take effect (a person said so, or the tool's reconcile step found no effect under its idempotency key).",
  ),
  reconcile_failed: recorded(
    "A tool's or service's reconcile step could not tell whether a lost call took effect (a warning; details.cause); the call waits for a person.",
    true,
  ),
  not_resumed: recorded('An action of a graph declared without persistence was not resumed after a restart.'),
  tool_worker_nested: recorded('A tool worker declared a task in words instead of a complete tool call.'),
  tool_worker_budget_exceeded: recorded(
    'A tool worker used its model calls (limits.toolWorkerModelCalls) or tokens (limits.toolWorkerTokens).',
  ),
  output_over_budget: recorded(
    'The action asked for if_truncated: fail and its output was over the observation budget; details: outputTokens, budgetTokens, ref (the full output is stored there).',
  ),
  unknown_runtime_operation: recorded('The runtime operation is not one OAR knows.'),
  script_exhausted: recorded('The scripted model ran out of steps.'),
  script_agent_missing: recorded('The scripted model has no steps for this agent.'),
  artifact_too_large: recorded("A tool's output is larger than limits.maxArtifactBytes."),
  unknown_tool: recorded('The model called a tool that is not in the binding.'),
  invalid_tool_input: recorded("The tool input does not match the tool's schema; the model is told what to fix."),
  invalid_tool_args: recorded('The tool input is outside what the tool accepts (for example an unsafe pattern).', true),
  // The business CLI behind project_cli (docs/tool-protocol.md): the record's ToolAgentOutput keeps the spec's code.
  action_not_allowed: recorded(
    "The business CLI's module.method is not in the binding's whitelist ∩ the CLI's router (ACTION_NOT_ALLOWED); nothing started.",
  ),
  invalid_action_input: recorded(
    "The input does not match the method's schema (INVALID_ACTION_INPUT); the model sees input_schema and corrects the call.",
    true,
  ),
  credential_invalid: recorded(
    'The business CLI refused the controlled credential (CREDENTIAL_MISSING, _INVALID, _EXPIRED): check that the CLI verifies with the key OAR signs with.',
  ),
  credential_unavailable: recorded(
    "The variable holding the credential's signing key (tools.cli.credential.keyEnv) is not set; nothing started.",
    true,
  ),
  cli_failed: recorded(
    "The business CLI reported a failure (its code is the record's error.code, e.g. HANDLER_FAILED).",
  ),
  cli_unavailable: recorded('The business CLI could not be started (its command is missing or not executable).', true),
  cli_output_invalid: recorded(
    'The business CLI exited 0 without printing one JSON result object for the call (CLI_OUTPUT_INVALID).',
  ),
  cli_exit_nonzero: recorded(
    'The business CLI exited non-zero (or was killed) without a JSON result (CLI_EXIT_NONZERO); details: exitCode, stderr.',
  ),
  cli_output_too_large: recorded(
    'The business CLI printed more than tools.cli.maxOutputBytes (CLI_OUTPUT_TOO_LARGE); it was stopped.',
  ),
  invalid_pattern: recorded('A search pattern is invalid or outside the safe subset; the message says why.'),
  pattern_worker_failed: recorded('The pattern matcher could not run.', true),
  permission_denied: recorded('A permission rule, the mode or a person denied the action.'),
  declined: recorded('A person declined to answer the question the model asked.'),
  path_outside_workspace: recorded('A path resolves outside the workspace (.., a symlink or a hard link).'),
  invalid_path: recorded('A path is empty or malformed.'),
  not_found: recorded('The file or directory does not exist.'),
  is_directory: recorded('A file was expected; the path is a directory.'),
  not_a_directory: recorded('A directory was expected; the path is a file.'),
  not_a_file: recorded('The path is not a regular file.'),
  binary_file: recorded('The file is binary; it is not shown as text.'),
  io_error: recorded('The file system failed.', true),
  no_match: recorded('edit: the text to replace was not found.'),
  ambiguous_match: recorded('edit: the text to replace occurs more than once; give more context.'),
  no_change: recorded('edit: the replacement equals the original.'),
  tool_timeout: recorded(
    'The tool (or an expand_ref pattern search) ran longer than its timeout (limits.toolTimeoutMs unless the tool sets one). Retryable, except an exec command stopped at its own timeoutMs (it would be again).',
    'depends',
  ),
  aborted: recorded('The tool did not start or was stopped because the turn was interrupted.'),
  hook_denied: recorded(
    "An after_tool_call hook withheld the call's result from the model (docs/hooks.md); the output is stored.",
  ),
  hook_failed: recorded(
    'A hook could not start, exited non-zero or threw; its onFailure policy decided instead (docs/hooks.md).',
  ),
  hook_timeout: recorded('A hook did not answer within its timeoutMs; its onFailure policy decided instead.', true),
  hook_output_invalid: recorded(
    'A hook answered something that is not the hook protocol (not JSON, an unknown decision, a decision its point does not take).',
  ),
  hook_output_too_large: recorded('A command hook printed more than its maxOutputBytes; it was stopped.'),
  mcp_unavailable: recorded(
    'An MCP server could not be reached (not started, crashed, refused the connection, waiting out its restart backoff); details: server, retryInMs, stderr (docs/mcp.md).',
    true,
  ),
  mcp_timeout: recorded(
    "An MCP server did not answer within the server's timeoutMs; it is restarted before its next use.",
    true,
  ),
  mcp_protocol_error: recorded(
    'An MCP server answered something that is not MCP; it is restarted before its next use.',
    true,
  ),
  mcp_tool_failed: recorded('An MCP server answered the call with a JSON-RPC error (details.mcpCode).'),
  mcp_tool_error: recorded("An MCP tool reported its own failure (isError); the message is the tool's text."),
  pipeline_step_failed: recorded(
    "A step of a pipeline failed, was denied or needed approval; details.cause is the step's error, details.steps what ran.",
  ),
  pipeline_mapping_unresolved: recorded(
    'A pipeline step input references a value that does not exist ($input or $step path) and has no default.',
  ),
  approval_required: recorded(
    'A pipeline step matches an ask rule; a running pipeline cannot wait for an answer. Add an allow rule or run the step as its own action.',
  ),
  service_http_error: recorded(
    'The service answered an HTTP error (details: status, body). Retryable (and retried for idempotent methods) for 408, 425, 429 and 5xx.',
    'depends',
  ),
  service_timeout: recorded('The service did not answer within its timeoutMs.', true),
  service_network_error: recorded('The service could not be reached (connection refused, DNS, reset).', true),
  service_bad_json: recorded('The service answered a JSON content type that does not parse.'),
  service_response_too_large: recorded("The service's answer is larger than its maxResponseBytes."),
  service_auth_missing: recorded("The environment variable the service's auth names is not set; nothing was sent."),
  unavailable: recorded(
    'exec/process: the process id is unknown here, belongs to another session or thread, or is from before a restart (a runtime.warning process_unavailable names it).',
  ),
  process_unavailable: recorded(
    'The runtime.warning of a process id that is not available to the calling thread (docs/commands.md).',
  ),
  command_not_found: recorded('exec: the program does not exist (or is not on the PATH the binding passes).'),
  spawn_failed: recorded('exec: the command could not be started (not executable, a resource limit); details say why.'),
  sandbox_unavailable: recorded(
    'exec: the sandbox cannot start here and tools.exec.sandbox.unsandboxed is deny; install bubblewrap or change the policy.',
  ),
  too_many_processes: recorded(
    'exec: the session already runs tools.exec.maxBackground background processes; terminate one first.',
    true,
  ),
  process_exited: recorded('process write: the process has exited or closed its standard input.'),
  process_input_unavailable: recorded(
    'write_process_stdin: the text of the request is no longer in the store (the runtime warning answering it).',
  ),
  process_terminated: recorded(
    'exec: the command was stopped on request (terminate_process) before it finished; its output so far is kept (details: outputRef).',
  ),
} as const satisfies Record<string, ErrorCodeInfo>;

export type ErrorCode = keyof typeof ERROR_CODES;

/** The exit status for an error a command failed with (unknown codes are treated as bugs). */
export function exitCodeFor(code: string): number {
  const info = (ERROR_CODES as Record<string, ErrorCodeInfo>)[code];
  return info?.exit ?? (info ? EXIT.failed : EXIT.internal);
}
