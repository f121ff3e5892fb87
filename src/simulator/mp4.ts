// The smallest structurally valid MP4 (ISO BMFF): ftyp + moov(mvhd) + empty mdat, stamped with the job id
// in a `free` box so every video has its own bytes (and its own sha256).

function box(type: string, ...payload: Buffer[]): Buffer {
  const body = Buffer.concat(payload);
  const header = Buffer.alloc(8);
  header.writeUInt32BE(8 + body.length, 0);
  header.write(type, 4, 'latin1');
  return Buffer.concat([header, body]);
}

function mvhd(durationSeconds: number): Buffer {
  const b = Buffer.alloc(100);
  const timescale = 1000;
  b.writeUInt32BE(0, 0); // version 0, flags 0
  b.writeUInt32BE(timescale, 12);
  b.writeUInt32BE(durationSeconds * timescale, 16);
  b.writeUInt32BE(0x00010000, 20); // rate 1.0
  b.writeUInt16BE(0x0100, 24); // volume 1.0
  // unity matrix
  [0x00010000, 0, 0, 0, 0x00010000, 0, 0, 0, 0x40000000].forEach((v, i) => b.writeUInt32BE(v, 36 + i * 4));
  b.writeUInt32BE(1, 96); // next track id
  return box('mvhd', b);
}

export function tinyMp4(tag: string, durationSeconds = 5): Buffer {
  const ftyp = box('ftyp', Buffer.from('isom'), Buffer.from([0, 0, 2, 0]), Buffer.from('isomiso2mp41'));
  return Buffer.concat([
    ftyp,
    box('moov', mvhd(durationSeconds)),
    box('free', Buffer.from(tag)),
    box('mdat'),
  ]);
}
