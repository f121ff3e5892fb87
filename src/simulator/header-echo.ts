// A misconfigured proxy's 500 page that prints the request's headers verbatim, Authorization included (the
// `echoHeaders500` fault). A user's manifest once kept 9 characters of a key's secret from such a page: the
// client cut the page at 200 characters before redacting it, and the key's header straddled the cut. So the
// Authorization line starts at a fixed offset, putting the secret's first characters just below 200.
import type { IncomingMessage } from 'node:http';

/** Where the Authorization line starts in the page: its secret (after `Bearer sk-`) starts 25 later, at 191. */
export const AUTHORIZATION_AT = 166;

/** The page's HTML: the request's headers as sent (name and value), the Authorization header first. */
export function headerEchoPage(req: IncomingMessage): string {
  const lines: string[] = [];
  for (let i = 0; i + 1 < req.rawHeaders.length; i += 2) {
    const line = `${req.rawHeaders[i]}: ${req.rawHeaders[i + 1]}`;
    if (req.rawHeaders[i]!.toLowerCase() === 'authorization') lines.unshift(line);
    else lines.push(line);
  }
  const head =
    '<html><head><title>500 Internal Server Error</title></head>\n<body>\n' +
    '<h1>500 Internal Server Error</h1>\n<p>upstream error; request headers:</p>\n';
  // The request line goes below the headers, so its length cannot move them; padding (HTML ignores it) sets
  // the offset.
  return (
    `${head.padEnd(AUTHORIZATION_AT - '<pre>\n'.length)}<pre>\n${lines.join('\n')}\n</pre>\n` +
    `<p>${req.method} ${req.url}</p>\n<hr><center>proxy</center>\n</body></html>\n`
  );
}
