// The request index's string table: every string gets one number, found again by its text, given back
// exactly (any text, however the codec packs it), across growth and trimming.
import { describe, expect, it } from 'vitest';
import { StringSet, type Codec } from '../../src/results/string-set';

describe('StringSet', () => {
  it('numbers strings in the order they were first added and finds each again', () => {
    const set = new StringSet();
    const texts = Array.from({ length: 20_000 }, (_, i) => `row-${i}${i % 7 === 0 ? ' ünïcødé ✓' : ''}`);
    texts.forEach((t, i) => expect(set.add(t)).toBe(i));
    // Added again: the same number, nothing new.
    expect(set.add('row-5')).toBe(5);
    expect(set.size).toBe(texts.length);
    texts.forEach((t, i) => {
      expect(set.find(t)).toBe(i);
      expect(set.text(i)).toBe(t);
    });
    expect(set.find('row-20000')).toBe(-1);
    expect(set.find('')).toBe(-1);
    expect(set.add('')).toBe(texts.length);
    expect(set.find('')).toBe(texts.length);
  });

  it('keeps working after trim, adding more as before', () => {
    const set = new StringSet();
    for (let i = 0; i < 1000; i++) set.add(`a${i}`);
    set.trim();
    for (let i = 0; i < 1000; i++) expect(set.find(`a${i}`)).toBe(i);
    for (let i = 1000; i < 3000; i++) expect(set.add(`a${i}`)).toBe(i);
    for (let i = 0; i < 3000; i++) expect(set.text(i)).toBe(`a${i}`);
  });

  it('stores what a codec packs and gives back the exact text', () => {
    // A codec that stores every string reversed: the set must compare and decode through it.
    const reversed: Codec = {
      maxBytes: (t) => t.length * 3,
      encode: (t, into) => into.write([...t].reverse().join('')),
      decode: (b, s, e) => [...b.toString('utf8', s, e)].reverse().join(''),
    };
    const set = new StringSet(reversed);
    expect(set.add('abc')).toBe(0);
    expect(set.add('cba')).toBe(1);
    expect(set.find('abc')).toBe(0);
    expect(set.text(1)).toBe('cba');
  });
});
