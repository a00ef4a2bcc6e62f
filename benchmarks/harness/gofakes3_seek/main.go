// Command gofakes3_seek serves gofakes3's memory backend with a LIST that stops at the end of the
// prefix's key range. gofakes3 v1.2.0's s3mem seeks to the marker and then walks every following key of
// the bucket, matching or not, so a LIST of a Delta log costs as much as the data files that sort after
// it; the benchmarks measure our commits, not that walk. Every other call is the memory backend's own.
package main

import (
	"flag"
	"log"
	"net"
	"net/http"
	"strings"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// The inner backend is read in pages that start small (a log listing after start-after holds a few
// keys) and grow for long listings.
const (
	firstPage   = 32
	largestPage = 1000
)

// seekBackend embeds the memory backend, so it is the same store with one method replaced.
type seekBackend struct {
	*s3mem.Backend
}

// ListBucket answers as s3mem does (prefix and delimiter matching, common prefixes, MaxKeys, NextMarker,
// IsTruncated) but reads only the keys from the marker to the end of the prefix's range, and seeks past
// the keys under a common prefix. A key matches a prefix when it begins with it (S3's rule); a listing
// with neither prefix nor delimiter, or a prefix beginning with the delimiter, is left to s3mem (a plain
// walk from the marker; its matching trims leading delimiters).
func (b *seekBackend) ListBucket(name string, prefix *gofakes3.Prefix, page gofakes3.ListBucketPage) (*gofakes3.ObjectList, error) {
	if prefix == nil || (!prefix.HasPrefix && !prefix.HasDelimiter) || (prefix.HasDelimiter && strings.HasPrefix(prefix.Prefix, prefix.Delimiter)) {
		return b.Backend.ListBucket(name, prefix, page)
	}
	out := gofakes3.NewObjectList()
	from := page.Marker // the listing holds keys after this one
	if from < prefix.Prefix && prefix.Prefix != "" {
		from = justBefore(prefix.Prefix)
	}
	var match gofakes3.PrefixMatch
	var count int64
	size := int64(firstPage)
	for {
		inner, err := b.Backend.ListBucket(name, nil, gofakes3.ListBucketPage{Marker: from, HasMarker: from != "", MaxKeys: size})
		if err != nil {
			return nil, err
		}
		size = min(size*2, largestPage)
		next := ""
		for _, item := range inner.Contents {
			if !strings.HasPrefix(item.Key, prefix.Prefix) {
				return out, nil // sorted keys: every later key is past the prefix's range too
			}
			if page.MaxKeys > 0 && count >= page.MaxKeys {
				out.IsTruncated = true
				return out, nil
			}
			prefix.Match(item.Key, &match)
			if match.CommonPrefix {
				// S3 lists a common prefix once, and not again on a page whose marker is at or inside it
				if match.MatchedPart > page.Marker {
					out.AddPrefix(match.MatchedPart)
					out.NextMarker = item.Key
					count++
				}
				next = match.MatchedPart + "\xff" // after every key under it: no UTF-8 key holds 0xff
				break
			}
			out.Add(item)
			out.NextMarker = item.Key
			count++
		}
		switch {
		case next != "":
			from = next
		case inner.IsTruncated && len(inner.Contents) > 0:
			from = inner.Contents[len(inner.Contents)-1].Key
		default:
			return out, nil
		}
	}
}

// justBefore is a marker below the prefix with no UTF-8 key between the two, so a listing after it
// starts at the prefix itself (a key equal to the prefix included).
func justBefore(prefix string) string {
	last := prefix[len(prefix)-1]
	if last == 0 {
		return prefix[:len(prefix)-1]
	}
	return prefix[:len(prefix)-1] + string([]byte{last - 1, 0xff})
}

func main() {
	host := flag.String("host", ":9000", "address to serve on")
	quiet := flag.Bool("quiet", false, "log nothing to stderr")
	flag.Parse()

	logger := gofakes3.GlobalLog()
	if *quiet {
		logger = gofakes3.DiscardLog()
	}
	backend := &seekBackend{s3mem.New()}
	faker := gofakes3.New(backend, gofakes3.WithLogger(logger), gofakes3.WithIntegrityCheck(true))

	listener, err := net.Listen("tcp", *host)
	if err != nil {
		log.Fatal(err)
	}
	log.Println("using port:", listener.Addr().(*net.TCPAddr).Port)
	log.Fatal((&http.Server{Handler: faker.Server()}).Serve(listener))
}
