import http from 'node:http';
import net from 'node:net';

/** An export over HTTP/1.0, on a raw socket: the head and the body as the connection's close delimited it, and when that close came. */
export function exportOverHttp10(port: number, path: string, key: string): Promise<{ head: string; body: string; closedAt: number }> {
  return new Promise((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1', () => s.write(`GET ${path} HTTP/1.0\r\nHost: x\r\nAuthorization: Bearer ${key}\r\n\r\n`));
    let raw = '';
    s.setEncoding('utf8');
    s.on('data', (c: string) => (raw += c));
    s.on('error', reject);
    s.on('close', () => {
      const i = raw.indexOf('\r\n\r\n');
      resolve({ head: raw.slice(0, i), body: raw.slice(i + 4), closedAt: performance.now() });
    });
  });
}

/** An export over HTTP/1.1 (chunked): the body, whether it ended (its last chunk came) or was aborted, and when. */
export function exportOverHttp11(port: number, path: string, key: string): Promise<{ status: number; body: string; complete: boolean; closedAt: number }> {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port, path, agent: false, headers: { authorization: `Bearer ${key}` } }, (res) => {
      let body = '';
      let done = false;
      const finish = (complete: boolean): void => {
        if (!done) resolve({ status: res.statusCode ?? 0, body, complete, closedAt: performance.now() });
        done = true;
      };
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => finish(res.complete));
      res.on('aborted', () => finish(false));
      res.on('error', () => finish(false));
      res.on('close', () => finish(res.complete));
    });
    req.on('error', reject);
  });
}
