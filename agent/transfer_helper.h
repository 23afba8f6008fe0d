// The agent's transfer helper: `airlock-agent --unpack` and `--pack`, exec'd inside a sandbox as
// an ordinary execution (argv[0] /proc/self/exe), so archives are opened and written as the
// sandbox user, under the sandbox's seccomp filter, Landlock rules and limits, never by the host.
//
//   --unpack DIR [--framed [--listing N]] [--max-bytes N] [--max-files N] [--max-depth N]
//            [--max-ratio R]
//       Reads an archive (tar, pax, cpio, zip; gzip, bzip2, xz, zstd, lz4: libarchive's
//       detection) from stdin and extracts it into DIR. Every entry is checked before it is
//       written: no absolute path, no `..`, no device, FIFO or socket, no symlink or hard link
//       that leaves DIR, at most N files, N bytes and a path depth of N, and a ratio of
//       extracted to compressed bytes of at most R (checked while streaming: a bomb stops at
//       the cap, not after). Extraction goes into a staging directory beside or inside DIR, which
//       is moved into place only when the whole archive passed; on any error it is removed.
//       Prints {"files":..,"dirs":..,"links":..,"bytes":..,"compressed_bytes":..} on stdout.
//       --framed: stdin is chunks ('D', 4-byte little-endian length, bytes) ended by 'E'; an
//       'A' or a stream that stops without 'E' aborts, so a source that failed midway never
//       commits an archive that happened to parse up to where it stopped. Every 512 KiB read it
//       prints "C BYTES" on stdout (the archive bytes read so far): the supervisor's credit, so
//       it never sends more than the agent may hold for a process that has not read it yet.
//       --listing N (with --framed): once the archive is staged, prints its entries on stdout,
//       "L TYPE SIZE NAME" lines (file, dir, symlink, hardlink; at most N bytes of them) and
//       "L-END ENTRIES TRUNCATED", then reads one more byte: 'C' moves the tree into place,
//       anything else removes it. The supervisor's review chain decides in between.
//   --pack DIR --format tar|tar.gz|tar.zst|zip [--max-bytes N] [--max-files N]
//       Writes DIR's tree (symlinks as links, never followed; no other file systems) as an
//       archive on stdout, and the same summary on stderr's last line.
// Errors: one line on stderr naming the entry and the rule, exit 1 (2 for bad arguments).
#pragma once

namespace airlock::agent {

// argv[1] is "--unpack" or "--pack"; returns the process's exit code.
int transferHelperMain(int argc, char** argv);

}  // namespace airlock::agent
