package domain

// ShardName names one shard of a tenant's keys where the background workers
// (the audit drainer, the webhook dispatcher) walk them, one queue each: the
// tenant's own name for its shard 0, "<tenant>:<n>" for shard n > 0
// (redis.tenant_shards). The store hands these names out and takes them back;
// the workers only pass them on, count by them and log them.
type ShardName string
