/**
 * A vitest setupFiles entry (vitest.config.ts), the first: before each test file is imported, this worker's database
 * becomes process.env.DATABASE_URL (worker-database.ts).
 */
import { useWorkerDatabase } from './worker-database.js';

await useWorkerDatabase();
