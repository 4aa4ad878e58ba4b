//! A hash's fields (and values) from its `DUMP` payload, for the cleaner's
//! first pass and for reads: a small hash is one listpack, and `DUMP`
//! returns it as one string (a copy, optionally LZF-compressed), where
//! `HKEYS` or `HGETALL` format every field into the reply one by one (6 to
//! 7 times the server's CPU at 181 integer fields, measured on Redis 7.0),
//! and the client then parses each as a reply of its own.
//!
//! Reads exactly one payload shape: a hash in listpack encoding
//! (`RDB_TYPE_HASH_LISTPACK`, Redis 7.0 and later), its string stored raw
//! or LZF-compressed. Anything else (a hashtable-encoded hash, the ziplist
//! of Redis 6, a type this code does not know, a payload that does not
//! add up) is `None`, and the caller reads that hash with `HKEYS` or
//! `HGETALL`: this module never guesses. A read walks the listpack once
//! ([`listpack_pairs`]), so a listpack found not to add up part way
//! through is an error there (the server wrote it), not a second read.
//! It does not check the payload's CRC (the bytes come straight from the
//! server).
//!
//! It also writes one shape, for the first pass's rewrites
//! ([`hash_payload_keeping`]): a listpack hash holding some of a read
//! hash's pairs, their entries copied unchanged (never re-encoded), stored
//! raw, with the read payload's RDB version and a CRC-64 the server checks
//! on `RESTORE`.

/// `RDB_TYPE_HASH_LISTPACK`.
const HASH_LISTPACK: u8 = 16;
/// `RDB_ENC_LZF` in the special (`11`) length encoding.
const ENC_LZF: u8 = 3;
/// A payload's checksum (Redis's CRC-64, Jones), its tables built at
/// compile time, 16 bytes a step.
static PAYLOAD_CRC: crc::Crc<u64, crc::Table<16>> =
    crc::Crc::<u64, crc::Table<16>>::new(&crc::CRC_64_REDIS);

/// One entry of a listpack: an integer, or bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Entry<'a> {
    Int(i64),
    Bytes(&'a [u8]),
}

/// The listpack of the hash whose `DUMP` payload is `payload` (fields and
/// values in turn; read it with [`listpack_entries`]), or `None` when the
/// payload is not a listpack-encoded hash.
pub(crate) fn hash_listpack(payload: &[u8]) -> Option<Vec<u8>> {
    // The payload: type, object, 2 bytes of RDB version, 8 of CRC.
    let body = payload.get(..payload.len().checked_sub(10)?)?;
    let (&kind, rest) = body.split_first()?;
    if kind != HASH_LISTPACK {
        return None;
    }
    let (listpack, rest) = rdb_string(rest)?;
    rest.is_empty().then_some(listpack)
}

/// Every entry of a hash's listpack (fields and values in turn), borrowed
/// from it, or `None` when it does not add up (an odd count included).
pub(crate) fn listpack_entries(lp: &[u8]) -> Option<Vec<Entry<'_>>> {
    let mut entries = Vec::with_capacity(listpack_count(lp)?);
    walk_listpack(lp, |entry, _| entries.push(entry))?;
    entries.len().is_multiple_of(2).then_some(entries)
}

/// Calls `each` with every field and value of a hash's listpack, in
/// order, each borrowed from it, and stops at the first error `each`
/// answers: `Some` of that, or `None` when the listpack does not add up
/// (an odd count included). The entries are read once, with no vector of
/// them (a read of a hash's slices goes through here).
pub(crate) fn listpack_pairs<'a, E>(
    lp: &'a [u8],
    mut each: impl FnMut(Entry<'a>, Entry<'a>) -> Result<(), E>,
) -> Option<Result<(), E>> {
    listpack_count(lp)?;
    let mut p = 6;
    let mut field = None;
    loop {
        let &b = lp.get(p)?;
        if b == 0xff {
            break;
        }
        let (entry, size) = entry_at(&lp[p..])?;
        p += size + backlen_size(size);
        match field.take() {
            None => field = Some(entry),
            Some(f) => {
                if let Err(e) = each(f, entry) {
                    return Some(Err(e));
                }
            }
        }
    }
    (p + 1 == lp.len() && field.is_none()).then_some(Ok(()))
}

/// The DUMP payload of a hash holding the field-value pairs of `lp` (a
/// hash's listpack, as [`hash_listpack`] answers it from the payload
/// `read`) whose pair number (from 0) `keep` accepts, each pair's entries
/// copied as they are, in `read`'s RDB version and with its checksum: what
/// `RESTORE` takes to write that hash in one step. `None` when `read` or
/// `lp` does not add up, or no pair is kept (`RESTORE` refuses an empty
/// hash).
pub(crate) fn hash_payload_keeping(
    read: &[u8],
    lp: &[u8],
    mut keep: impl FnMut(usize) -> bool,
) -> Option<Vec<u8>> {
    let version = read.get(read.len().checked_sub(10)?..read.len() - 8)?;
    let mut entries: Vec<u8> = Vec::with_capacity(lp.len());
    let (mut kept, mut n) = (0usize, 0usize);
    walk_listpack(lp, |_, span| {
        if keep(n / 2) {
            entries.extend_from_slice(&lp[span]);
            kept += 1;
        }
        n += 1;
    })?;
    if kept == 0 || !n.is_multiple_of(2) {
        return None;
    }
    // The listpack: its size and entry count (65,535 says "count them"),
    // the entries, the end mark.
    let size = u32::try_from(6 + entries.len() + 1).ok()?;
    let mut payload = Vec::with_capacity(entries.len() + 32);
    payload.push(HASH_LISTPACK);
    rdb_put_len(&mut payload, size as usize);
    payload.extend_from_slice(&size.to_le_bytes());
    payload.extend_from_slice(&u16::try_from(kept).unwrap_or(u16::MAX).to_le_bytes());
    payload.extend_from_slice(&entries);
    payload.push(0xff);
    payload.extend_from_slice(version);
    let crc = PAYLOAD_CRC.checksum(&payload);
    payload.extend_from_slice(&crc.to_le_bytes());
    Some(payload)
}

/// The entry count a listpack's header gives (a capacity: 65,535 says the
/// entries must be counted), or `None` when its size or end mark is wrong.
fn listpack_count(lp: &[u8]) -> Option<usize> {
    let total = u32::from_le_bytes(lp.get(..4)?.try_into().ok()?) as usize;
    if total != lp.len() || lp.last() != Some(&0xff) {
        return None;
    }
    Some(usize::from(u16::from_le_bytes(lp.get(4..6)?.try_into().ok()?)))
}

/// Calls `each` with every entry of `lp` and the bytes it spans (its back
/// length included), in order; `None` when the listpack does not add up.
fn walk_listpack<'a>(
    lp: &'a [u8],
    mut each: impl FnMut(Entry<'a>, std::ops::Range<usize>),
) -> Option<()> {
    listpack_count(lp)?;
    let mut p = 6;
    loop {
        let &b = lp.get(p)?;
        if b == 0xff {
            break;
        }
        let (entry, size) = entry_at(&lp[p..])?;
        let end = p + size + backlen_size(size);
        each(entry, p..end);
        p = end;
    }
    (p + 1 == lp.len()).then_some(())
}

/// Appends `len` in the RDB length encoding (the shortest form).
fn rdb_put_len(out: &mut Vec<u8>, len: usize) {
    if len < 1 << 6 {
        out.push(len as u8);
    } else if len < 1 << 14 {
        out.extend_from_slice(&[0x40 | (len >> 8) as u8, len as u8]);
    } else if let Ok(len) = u32::try_from(len) {
        out.push(0x80);
        out.extend_from_slice(&len.to_be_bytes());
    } else {
        out.push(0x81);
        out.extend_from_slice(&(len as u64).to_be_bytes());
    }
}

/// One RDB string at the start of `b` and what follows it.
fn rdb_string(b: &[u8]) -> Option<(Vec<u8>, &[u8])> {
    let (&first, _) = b.split_first()?;
    if first >> 6 == 3 {
        if first & 0x3f != ENC_LZF {
            return None;
        }
        let (compressed, rest) = rdb_len(&b[1..])?;
        let (plain, rest) = rdb_len(rest)?;
        let data = rest.get(..compressed)?;
        let out = lzf_decompress(data, plain)?;
        return Some((out, &rest[compressed..]));
    }
    let (len, rest) = rdb_len(b)?;
    Some((rest.get(..len)?.to_vec(), &rest[len..]))
}

/// An RDB length (not the special encoding) and what follows it.
fn rdb_len(b: &[u8]) -> Option<(usize, &[u8])> {
    let (&first, rest) = b.split_first()?;
    match first >> 6 {
        0 => Some((usize::from(first & 0x3f), rest)),
        1 => {
            let (&next, rest) = rest.split_first()?;
            Some(((usize::from(first & 0x3f) << 8) | usize::from(next), rest))
        }
        2 if first == 0x80 => {
            let n = u32::from_be_bytes(rest.get(..4)?.try_into().ok()?);
            Some((usize::try_from(n).ok()?, &rest[4..]))
        }
        2 if first == 0x81 => {
            let n = u64::from_be_bytes(rest.get(..8)?.try_into().ok()?);
            Some((usize::try_from(n).ok()?, &rest[8..]))
        }
        _ => None,
    }
}

/// LZF (as `lzf_d.c`), `plain` bytes expected exactly, written into a
/// buffer of that size: no growth check per byte, and a long back reference
/// that does not overlap what it copies moved in one step.
fn lzf_decompress(data: &[u8], plain: usize) -> Option<Vec<u8>> {
    let mut out = vec![0u8; plain];
    let (mut i, mut o) = (0, 0);
    while i < data.len() {
        let ctrl = usize::from(data[i]);
        i += 1;
        if ctrl < 32 {
            let len = ctrl + 1;
            out.get_mut(o..o + len)?
                .copy_from_slice(data.get(i..i + len)?);
            i += len;
            o += len;
        } else {
            let mut len = ctrl >> 5;
            if len == 7 {
                len += usize::from(*data.get(i)?);
                i += 1;
            }
            let back = ((ctrl & 0x1f) << 8) + usize::from(*data.get(i)?) + 1;
            i += 1;
            let from = o.checked_sub(back)?;
            let len = len + 2;
            if o + len > plain {
                return None;
            }
            if back >= len && len > 16 {
                out.copy_within(from..from + len, o);
            } else {
                // Byte by byte, as LZF defines an overlapping copy.
                for k in 0..len {
                    out[o + k] = out[from + k];
                }
            }
            o += len;
        }
    }
    (o == plain).then_some(out)
}

/// The fields (even entries) of a listpack holding a hash's fields and
/// values in turn ([`hash_listpack`]), as the text `HKEYS` would answer.
#[cfg(test)]
pub(crate) fn listpack_fields(lp: &[u8]) -> Option<Vec<Vec<u8>>> {
    Some(
        listpack_entries(lp)?
            .into_iter()
            .step_by(2)
            .map(|entry| match entry {
                Entry::Int(v) => v.to_string().into_bytes(),
                Entry::Bytes(b) => b.to_vec(),
            })
            .collect(),
    )
}

/// One listpack entry at the start of `e`, and its size without the back
/// length.
fn entry_at(e: &[u8]) -> Option<(Entry<'_>, usize)> {
    let b = *e.first()?;
    let int = |n: usize, bits: u32| -> Option<(Entry<'_>, usize)> {
        let mut raw = [0u8; 8];
        raw[..n].copy_from_slice(e.get(1..1 + n)?);
        let v = i64::from_le_bytes(raw);
        let shift = 64 - bits;
        Some((Entry::Int((v << shift) >> shift), 1 + n))
    };
    let text = |start: usize, len: usize| -> Option<(Entry<'_>, usize)> {
        Some((Entry::Bytes(e.get(start..start + len)?), start + len))
    };
    match b {
        _ if b & 0x80 == 0 => Some((Entry::Int(i64::from(b & 0x7f)), 1)),
        _ if b & 0xc0 == 0x80 => text(1, usize::from(b & 0x3f)),
        _ if b & 0xe0 == 0xc0 => {
            let v = (i64::from(b & 0x1f) << 8) | i64::from(*e.get(1)?);
            Some((Entry::Int((v << 51) >> 51), 2))
        }
        _ if b & 0xf0 == 0xe0 => text(2, (usize::from(b & 0x0f) << 8) | usize::from(*e.get(1)?)),
        0xf0 => text(
            5,
            u32::from_le_bytes(e.get(1..5)?.try_into().ok()?) as usize,
        ),
        0xf1 => int(2, 16),
        0xf2 => int(3, 24),
        0xf3 => int(4, 32),
        0xf4 => int(8, 64),
        _ => None,
    }
}

/// The bytes of the back length after an entry of `size` bytes.
fn backlen_size(size: usize) -> usize {
    match size {
        0..=127 => 1,
        128..=16382 => 2,
        16383..=2097150 => 3,
        2097151..=268435454 => 4,
        _ => 5,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lzf_round_trips_literals_and_back_references() {
        // "abcabcabcabc": 3 literals, then a back reference of 9 bytes.
        let data = [2, b'a', b'b', b'c', (7 << 5), 0, 2];
        assert_eq!(lzf_decompress(&data, 12).unwrap(), b"abcabcabcabc".to_vec());
        assert_eq!(lzf_decompress(&data, 11), None);
        // "abcdefabcdef": 6 literals, then a reference of 6 bytes that
        // does not overlap what it copies.
        let data = [5, b'a', b'b', b'c', b'd', b'e', b'f', (4 << 5), 5];
        assert_eq!(lzf_decompress(&data, 12).unwrap(), b"abcdefabcdef".to_vec());
        assert_eq!(lzf_decompress(&data, 10), None);
        // 20 literals, then a reference of 20 bytes (7 + 11 + 2) that does
        // not overlap: one move.
        let mut data = vec![19];
        data.extend(b'a'..b'a' + 20);
        data.extend([(7 << 5), 11, 19]);
        let once: Vec<u8> = (b'a'..b'a' + 20).collect();
        assert_eq!(lzf_decompress(&data, 40).unwrap(), [once.clone(), once].concat());
        assert_eq!(lzf_decompress(&data, 39), None);
        // A literal run past the end of the input is refused.
        assert_eq!(lzf_decompress(&[5, b'a'], 6), None);
        // A reference before the start is refused, not a panic.
        assert_eq!(lzf_decompress(&[(1 << 5), 5], 3), None);
    }

    #[test]
    fn rdb_lengths_read_back_as_written() {
        for len in [0, 1, 63, 64, 16_383, 16_384, 70_000, u32::MAX as usize, 1 << 33] {
            let mut b = Vec::new();
            rdb_put_len(&mut b, len);
            b.push(7);
            assert_eq!(rdb_len(&b), Some((len, &[7u8][..])), "{len}");
        }
    }

    fn hash_fields(payload: &[u8]) -> Option<Vec<Vec<u8>>> {
        listpack_fields(&hash_listpack(payload)?)
    }

    #[test]
    fn payloads_of_other_shapes_are_none() {
        assert_eq!(hash_fields(b""), None);
        assert_eq!(hash_fields(&[0; 12]), None);
        // A listpack hash whose listpack claims more bytes than it holds.
        let mut p = vec![HASH_LISTPACK, 7, 9, 0, 0, 0, 0, 0, 0xff];
        p.extend_from_slice(&[0; 10]);
        assert_eq!(hash_fields(&p), None);
    }
}
