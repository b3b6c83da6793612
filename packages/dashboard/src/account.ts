// Placeholder: replaced by the routes' real implementation in this change.

import type { FastifyInstance } from 'fastify';
import type { DashboardContext } from './context.ts';

export async function accountRoutes(_app: FastifyInstance, _ctx: DashboardContext): Promise<void> {}
