// The operator CLI: accounts, keys, credits, jobs, subscriptions and webhook secrets, for the
// person who runs the service (`npm run admin -- --help`), run on the store or sent to the
// embedded service over its admin socket (socket.ts).

export { runAdmin } from './run.ts';
export { runAdminCli } from './cli.ts';
export { adminSocketPath, callAdminSocket, serveAdminSocket, ADMIN_SOCKET_TIMEOUT_MS } from './socket.ts';
export { columns, type AdminResult } from './command.ts';
