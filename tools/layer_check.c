/*
 * layer_check.c - the main() of the cairn_layer_* link checks
 * (CMakeLists.txt, cn_layer): they link one layer's objects with those of
 * the layers below it and nothing else, so the link fails when the layer
 * calls up.  Never run.
 */
int main(void)
{
    return 0;
}
