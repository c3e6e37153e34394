// Placeholder replaced by the Markdown renderer (see the WikiApp issue): the target must have a
// source file to build.
