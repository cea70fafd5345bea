import { createServer, type Server, type Socket, connect as tcpConnect } from 'node:net';

/**
 * A TCP proxy in front of PostgreSQL that drops connections the way a server does when its backend is terminated
 * (`pg_terminate_backend`, a failover): at a chosen query it answers the client with the FATAL error PostgreSQL
 * sends (`57P01 terminating connection due to administrator command`) and closes the connection. Which query: the
 * proxy reads the client's side of the wire protocol (startup message, then typed messages) and, once it has seen
 * the `armOn` text go by (for example an event type inside an insert), drops the connection of each of the next
 * `count` Parse messages whose SQL matches `query`. Everything else passes through untouched, byte for byte.
 *
 * So a test can put a dropped connection exactly where timing alone never reliably would: on the first read after
 * a given write, in a real process talking to a real server.
 */
export class PgFaultProxy {
  private readonly server: Server;
  private readonly sockets = new Set<Socket>();
  private armed = false;
  private left: number;
  /** How many queries were answered with the fault. */
  dropped = 0;
  /** The SQL of the queries dropped, in order. */
  readonly droppedQueries: string[] = [];

  private constructor(
    private readonly upstream: { host: string; port: number },
    private readonly rule: { armOn: string; query: RegExp; count: number },
  ) {
    this.left = rule.count;
    this.server = createServer((client) => this.proxy(client));
  }

  static async start(
    upstream: { host: string; port: number },
    rule: { armOn: string; query: RegExp; count: number },
  ): Promise<PgFaultProxy> {
    const proxy = new PgFaultProxy(upstream, rule);
    await new Promise<void>((resolve) => proxy.server.listen(0, '127.0.0.1', resolve));
    return proxy;
  }

  get port(): number {
    const address = this.server.address();
    if (address === null || typeof address === 'string') throw new Error('the proxy is not listening');
    return address.port;
  }

  async close(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private proxy(client: Socket): void {
    const server = tcpConnect(this.upstream.port, this.upstream.host);
    this.sockets.add(client);
    this.sockets.add(server);
    const end = () => {
      client.destroy();
      server.destroy();
      this.sockets.delete(client);
      this.sockets.delete(server);
    };
    client.on('error', end);
    server.on('error', end);
    client.on('close', end);
    server.on('close', end);
    server.pipe(client);

    let pending = Buffer.alloc(0);
    let startup = true;
    let cut = false;
    client.on('data', (chunk: Buffer) => {
      if (cut) return;
      pending = Buffer.concat([pending, chunk]);
      for (;;) {
        // The startup message has no type byte: an int32 length (itself included), then the body.
        const header = startup ? 0 : 1;
        if (pending.length < header + 4) return;
        const length = pending.readInt32BE(header) + header;
        if (pending.length < length) return;
        const message = pending.subarray(0, length);
        pending = pending.subarray(length);
        if (startup) startup = false;
        else if (this.drops(message)) {
          cut = true;
          server.unpipe(client);
          client.end(fatalError('57P01', 'terminating connection due to administrator command'));
          server.destroy();
          return;
        }
        server.write(message);
      }
    });
  }

  /** Whether this client message is one the rule drops (and count it); arms the rule when `armOn` goes by. */
  private drops(message: Buffer): boolean {
    if (!this.armed) {
      if (message.includes(this.rule.armOn)) this.armed = true;
      return false;
    }
    // Parse: 'P', int32 length, statement name (C string), query (C string), …
    if (this.left === 0 || message[0] !== 0x50) return false;
    const nameEnd = message.indexOf(0, 5);
    const query = message.subarray(nameEnd + 1, message.indexOf(0, nameEnd + 1)).toString('utf8');
    if (!this.rule.query.test(query)) return false;
    this.left -= 1;
    this.dropped += 1;
    this.droppedQueries.push(query);
    return true;
  }
}

/** A PostgreSQL ErrorResponse of severity FATAL. */
function fatalError(code: string, text: string): Buffer {
  const field = (type: string, value: string) =>
    Buffer.concat([Buffer.from(type), Buffer.from(value), Buffer.from([0])]);
  const body = Buffer.concat([
    field('S', 'FATAL'),
    field('V', 'FATAL'),
    field('C', code),
    field('M', text),
    Buffer.from([0]),
  ]);
  const head = Buffer.alloc(5);
  head.write('E', 0);
  head.writeInt32BE(body.length + 4, 1);
  return Buffer.concat([head, body]);
}
