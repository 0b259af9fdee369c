/**
 * The configuration files of the private PostgreSQL cluster (PgCluster): one
 * Patroni file per node and HAProxy's, as the Patroni and HAProxy docs
 * recommend them, on the cluster's own loopback ports.
 */
import * as Path from "node:path"

/** One node's ports and folder. */
export interface NodeLayout {
  readonly name: string
  readonly pgPort: number
  readonly restPort: number
  readonly dataDir: string
}

/**
 * Patroni's settings of `node`: etcd v3, a synchronous standby, short
 * timings (a lost leader is replaced after `ttl`), bootstrap with initdb and
 * trust on loopback for postgres and replication.
 */
export const patroniYaml = (options: {
  readonly scope: string
  readonly node: NodeLayout
  readonly etcdPort: number
  readonly pgBin: string
  readonly socketDir: string
}): string => {
  const { node } = options
  return `scope: ${options.scope}
name: ${node.name}
log:
  level: INFO
restapi:
  listen: 127.0.0.1:${node.restPort}
  connect_address: 127.0.0.1:${node.restPort}
etcd3:
  hosts: 127.0.0.1:${options.etcdPort}
bootstrap:
  dcs:
    ttl: 10
    loop_wait: 2
    retry_timeout: 5
    maximum_lag_on_failover: 1048576
    synchronous_mode: true
    postgresql:
      use_pg_rewind: true
      remove_data_directory_on_rewind_failure: true
      remove_data_directory_on_diverged_timelines: true
      parameters:
        wal_level: replica
        hot_standby: "on"
        max_connections: 100
        shared_buffers: 32MB
  initdb:
    - encoding: UTF8
    - auth: trust
  pg_hba:
    - local all all trust
    - host all all 127.0.0.1/32 trust
    - host replication all 127.0.0.1/32 trust
postgresql:
  listen: 127.0.0.1:${node.pgPort}
  connect_address: 127.0.0.1:${node.pgPort}
  data_dir: ${node.dataDir}
  bin_dir: ${options.pgBin}
  pgpass: ${Path.join(Path.dirname(node.dataDir), `${node.name}.pgpass`)}
  authentication:
    superuser:
      username: postgres
    replication:
      username: postgres
  parameters:
    unix_socket_directories: ${options.socketDir}
tags: {}
`
}

/** How HAProxy treats the sessions of a node it marks down. */
export type BalancerMode = "closes-sessions" | "keeps-sessions"

/**
 * HAProxy in TCP mode in front of the nodes, routing to the one whose
 * Patroni answers 200 on GET /primary (Patroni's documented check), on one
 * port per mode: `closes-sessions` closes the sessions of a node marked down
 * (`on-marked-down shutdown-sessions`, as Patroni recommends); `keeps-sessions`
 * leaves them open, as a DNS name or a plain TCP balancer does.
 */
export const haproxyConfig = (options: {
  readonly ports: Readonly<Record<BalancerMode, number>>
  readonly nodes: ReadonlyArray<NodeLayout>
}): string =>
  [
    "global",
    "  maxconn 400",
    "defaults",
    "  mode tcp",
    "  retries 2",
    "  timeout connect 4s",
    "  timeout client 30m",
    "  timeout server 30m",
    "  timeout check 2s",
    ...(["closes-sessions", "keeps-sessions"] as const).flatMap((mode) => [
      `listen ${mode}`,
      `  bind 127.0.0.1:${options.ports[mode]}`,
      "  option httpchk GET /primary",
      "  http-check expect status 200",
      `  default-server inter 1s fall 2 rise 1${mode === "closes-sessions" ? " on-marked-down shutdown-sessions" : ""}`,
      ...options.nodes.map((node) => `  server ${node.name} 127.0.0.1:${node.pgPort} maxconn 100 check port ${node.restPort}`)
    ])
  ].join("\n") + "\n"
