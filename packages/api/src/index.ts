// @svc/api: the Fastify front. The composition root (@svc/runtime) builds the services and
// settings and hands them over; this package never reads the environment.
export { buildApp, type ApiServices, type ApiSettings } from './app.ts';
export type { Principal } from './plugins/auth.ts';
