// The strict HTTP/1.1 request parser (src/serve/http_parser.h): the framing rows of issue 26's table
// (conflicting Content-Length, Transfer-Encoding spellings, a signed length, a body without a length),
// head size and line limits, bare LF, obsolete folding, Host rules, query decoding and multipart bodies.
#include "serve/http_parser.h"

#include <gtest/gtest.h>

#include <string>

namespace {
using namespace vortex::serve::http;

// Scans and parses `text` as one head; the refusal's status, or 0 when accepted (then `*out`).
int parse(const std::string& text, Request* out = nullptr, HeadLimits limits = HeadLimits()) {
  HeadScanner scanner(limits);
  const HeadScanner::Result r = scanner.scan(text);
  if (r == HeadScanner::Result::kError) return scanner.error().status;
  if (r == HeadScanner::Result::kNeedMore) return -1;
  Request req;
  std::optional<HeadError> e = parse_head(std::string_view(text).substr(0, scanner.head_length()), limits, req);
  if (e) {
    EXPECT_FALSE(e->message.empty());
    return e->status;
  }
  if (out) *out = req;
  return 0;
}

TEST(HttpParser, AcceptsAPlainRequest) {
  Request r;
  ASSERT_EQ(parse("GET /v1/videos/video_1/content?variant=run_json HTTP/1.1\r\nHost: 127.0.0.1:8000\r\n"
                  "X-Thing:  spaced value \t\r\n\r\n",
                  &r),
            0);
  EXPECT_EQ(r.method, "GET");
  EXPECT_EQ(r.path, "/v1/videos/video_1/content");
  EXPECT_EQ(r.query, "variant=run_json");
  EXPECT_EQ(r.param("variant").value_or("?"), "run_json");
  EXPECT_FALSE(r.param("absent"));
  ASSERT_NE(r.header("X-THING"), nullptr);
  EXPECT_EQ(*r.header("x-thing"), "spaced value");
  EXPECT_TRUE(r.keep_alive);
  EXPECT_FALSE(r.content_length);
}

TEST(HttpParser, FramingIsStrict) {
  const std::string h = "POST /v1/videos HTTP/1.1\r\nHost: a\r\n";
  Request r;
  ASSERT_EQ(parse(h + "Content-Length: 59\r\n\r\n", &r), 0);
  EXPECT_EQ(r.content_length.value_or(0), 59u);
  EXPECT_EQ(parse(h + "Content-Length: 3\r\nContent-Length: 5\r\n\r\n"), 400);  // conflicting
  EXPECT_EQ(parse(h + "Content-Length: 3\r\nContent-Length: 3\r\n\r\n"), 400);  // repeated
  EXPECT_EQ(parse(h + "Content-Length: +59\r\n\r\n"), 400);                     // signed
  EXPECT_EQ(parse(h + "Content-Length: 5 9\r\n\r\n"), 400);
  EXPECT_EQ(parse(h + "Content-Length: 0x10\r\n\r\n"), 400);
  EXPECT_EQ(parse(h + "Content-Length: 99999999999999999999\r\n\r\n"), 400);  // overflow
  EXPECT_EQ(parse(h + "Transfer-Encoding : chunked\r\n\r\n"), 400);           // space before ':'
  EXPECT_EQ(parse(h + "Transfer-Encoding: xchunked\r\n\r\n"), 400);           // unknown coding
  EXPECT_EQ(parse(h + "Transfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n"), 400);
  EXPECT_EQ(parse(h + "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n"), 400);
  EXPECT_EQ(parse(h + "Transfer-Encoding: chunked\r\n\r\n"), 411);  // chunked bodies: not taken
  EXPECT_EQ(parse(h + "\r\n"), 411);                                // a body method, no length
  EXPECT_EQ(parse(h + "Expect: 100-continue\r\nContent-Length: 2\r\n\r\n", &r), 0);
  EXPECT_TRUE(r.expect_continue);
  EXPECT_EQ(parse(h + "Expect: something-else\r\nContent-Length: 2\r\n\r\n"), 417);
}

TEST(HttpParser, RequestLineAndHeadersAreStrict) {
  EXPECT_EQ(parse("GET / HTTP/1.1\nHost: a\n\n"), 400);                      // bare LF
  EXPECT_EQ(parse("GET / HTTP/1.1\r\nHost: a\r\nX: 1\r\n 2\r\n\r\n"), 400);  // obs-fold
  EXPECT_EQ(parse("GET / HTTP/1.1\r\nHost: a\r\nX\x01: 1\r\n\r\n"), 400);
  EXPECT_EQ(parse("GET / HTTP/1.1\r\nHost: a\r\nX: a\x01b\r\n\r\n"), 400);
  EXPECT_EQ(parse("GET / HTTP/1.1\r\nHost: a\r\nNo colon\r\n\r\n"), 400);
  EXPECT_EQ(parse(std::string("GET /\0 HTTP/1.1\r\nHost: a\r\n\r\n", 29)), 400);  // NUL
  EXPECT_EQ(parse("GET /\xff HTTP/1.1\r\nHost: a\r\n\r\n"), 0);                   // raw bytes >= 0x80: routed (404)
  EXPECT_EQ(parse("GET /a\x7f HTTP/1.1\r\nHost: a\r\n\r\n"), 400);                // a control byte
  EXPECT_EQ(parse("GET /%FF HTTP/1.1\r\nHost: a\r\n\r\n"), 0);                    // escaped: fine (no route later)
  EXPECT_EQ(parse("GET http://a/ HTTP/1.1\r\nHost: a\r\n\r\n"), 400);             // absolute form
  EXPECT_EQ(parse("GET  / HTTP/1.1\r\nHost: a\r\n\r\n"), 400);
  EXPECT_EQ(parse("get / HTTP/1.1\r\nHost: a\r\n\r\n"), 400);
  EXPECT_EQ(parse("GET / HTTP/2.0\r\nHost: a\r\n\r\n"), 505);
  EXPECT_EQ(parse("GET / HTTP/1.1x\r\nHost: a\r\n\r\n"), 400);
  EXPECT_EQ(parse("GET / HTTP/1.1\r\n\r\n"), 400);  // no Host
  EXPECT_EQ(parse("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"), 400);
  EXPECT_EQ(parse("\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n"), 400);
  Request r;
  ASSERT_EQ(parse("GET / HTTP/1.0\r\n\r\n", &r), 0);  // 1.0: no Host needed, closes by default
  EXPECT_FALSE(r.keep_alive);
  ASSERT_EQ(parse("GET / HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, Close\r\n\r\n", &r), 0);
  EXPECT_FALSE(r.keep_alive);
}

TEST(HttpParser, LimitsAreCheckedAsBytesArrive) {
  HeadLimits l;
  l.max_request_line = 64;
  l.max_head_bytes = 256;
  l.max_headers = 4;
  // A request line without its end: 414 as soon as it passes the limit, not when it ends.
  HeadScanner s(l);
  std::string line = "GET /" + std::string(55, 'a');  // 60 bytes
  EXPECT_EQ(s.scan(line), HeadScanner::Result::kNeedMore);
  line += "aaaaaaa";  // 67 bytes: past the line, its CR and LF
  EXPECT_EQ(s.scan(line), HeadScanner::Result::kError);
  EXPECT_EQ(s.error().status, 414);
  // A header line without a newline: 431 past the head limit.
  HeadScanner t(l);
  std::string head = "GET / HTTP/1.1\r\nX: " + std::string(300, 'b');
  EXPECT_EQ(t.scan(head), HeadScanner::Result::kError);
  EXPECT_EQ(t.error().status, 431);
  // Too many header lines.
  std::string many = "GET / HTTP/1.1\r\nHost: a\r\n";
  for (int i = 0; i < 6; ++i) {
    many += 'X';
    many += std::to_string(i);
    many += ": 1\r\n";
  }
  EXPECT_EQ(parse(many + "\r\n", nullptr, l), 431);
  // Byte by byte gives the same head as all at once.
  const std::string ok = "GET /x HTTP/1.1\r\nHost: a\r\n\r\nGET /y";
  HeadScanner u(l);
  HeadScanner::Result r = HeadScanner::Result::kNeedMore;
  size_t n = 0;
  while (r == HeadScanner::Result::kNeedMore && n < ok.size()) r = u.scan(std::string_view(ok).substr(0, ++n));
  ASSERT_EQ(r, HeadScanner::Result::kComplete);
  EXPECT_EQ(u.head_length(), ok.find("GET /y"));
}

TEST(HttpParser, QueryDecoding) {
  EXPECT_EQ(percent_decode("a%20b+c", true).value_or("?"), "a b c");
  EXPECT_EQ(percent_decode("a+b", false).value_or("?"), "a+b");
  EXPECT_FALSE(percent_decode("%2", true));
  EXPECT_FALSE(percent_decode("%zz", true));
  EXPECT_FALSE(percent_decode("%", true));
  Request r;
  r.query = "a=1&variant=video%5Flatents&variant=other";
  EXPECT_EQ(r.param("variant").value_or("?"), "video_latents");
  r.query = "variant=%G0";
  EXPECT_FALSE(r.param("variant"));
}

TEST(HttpParser, Multipart) {
  const std::string body =
      "--XyZ\r\nContent-Disposition: form-data; name=\"request\"\r\n\r\n{\"steps\": 2}\r\n"
      "--XyZ\r\nContent-Disposition: form-data; name=\"text_embeddings\"; filename=\"e.st\"\r\n"
      "Content-Type: application/octet-stream\r\n\r\nab\r\n--c\r\n--XyZ--\r\n";
  std::string why;
  auto parts = parse_multipart("multipart/form-data; boundary=XyZ", body, 4, &why);
  ASSERT_TRUE(parts) << why;
  ASSERT_EQ(parts->size(), 2u);
  EXPECT_EQ((*parts)[0].name, "request");
  EXPECT_EQ((*parts)[0].content, "{\"steps\": 2}");
  EXPECT_EQ((*parts)[1].name, "text_embeddings");
  EXPECT_EQ((*parts)[1].filename, "e.st");
  EXPECT_EQ((*parts)[1].content, "ab\r\n--c");
  auto quoted = parse_multipart("Multipart/Form-Data; charset=x; boundary=\"XyZ\"", body, 4, &why);
  ASSERT_TRUE(quoted) << why;
  EXPECT_FALSE(parse_multipart("multipart/form-data", body, 4, &why));                // no boundary
  EXPECT_FALSE(parse_multipart("multipart/form-data; boundary=XyZ", body, 1, &why));  // too many parts
  EXPECT_FALSE(parse_multipart("multipart/form-data; boundary=XyZ", body.substr(0, body.size() - 4), 4, &why));
  EXPECT_FALSE(parse_multipart("multipart/form-data; boundary=XyZ", "junk" + body, 4, &why));
  EXPECT_FALSE(parse_multipart("multipart/form-data; boundary=XyZ",
                               "--XyZ\r\nContent-Disposition: form-data\r\n\r\nx\r\n--XyZ--", 4, &why));  // no name
  EXPECT_FALSE(why.empty());
  EXPECT_EQ(media_type(" Application/JSON ; charset=utf-8"), "application/json");
}

}  // namespace
