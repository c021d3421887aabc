// Removes dist/ before a build so files deleted from src/ cannot linger in the published package.
import { rmSync } from 'node:fs';
rmSync(new URL('../dist/', import.meta.url), { recursive: true, force: true });
